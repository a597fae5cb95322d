"""Objects: on Cloud Storage through transforms/storage/gcs.py, on any other store, and for
every write, copy, rename, delete and match, through Beam's FileSystems.

Beam is imported on first use: only remote paths need it, and it takes seconds to import.
Compression detection is off, so an image whose name ends in `.gz` is never silently
decompressed. A request through FileSystems is retried by the store's own client alone
(Beam's gcsio for `gs://`), never by transforms/storage/retry.py as well.
"""

import errno
import io
from typing import BinaryIO

from tfrecord_pipeline.transforms.storage import gcs
from tfrecord_pipeline.transforms.storage.disk import check_size

_RAW = "uncompressed"  # Beam's CompressionTypes.UNCOMPRESSED


def filesystems(path: str):
    """Beam's FileSystems, imported on first use, to reach `path`. For a `gs://` path, only
    once Google credentials are found (gcs.client raises google-auth's error, which the command
    line tells in one line): without them Beam's gcsio would go on anonymously and retry each
    request for minutes before failing with a traceback."""
    if gcs.is_gcs(path):
        gcs.client()
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def read(path: str, max_bytes: int | None) -> tuple[bytes, str]:
    """An object's bytes and identity: on Cloud Storage from one request, on another store a
    stat, then a read. On Cloud Storage StoreUnavailableError when transient failures go on."""
    if not gcs.is_gcs(path):
        identity_before = identity(path)
        return _read_filesystem(path, max_bytes), identity_before
    read = gcs.read(path, max_bytes)
    if read is None:  # over the limit: its metadata says by how much (a second request)
        size = gcs.stat(path).size
        # Within the limit now, it was replaced meanwhile: over it still, by an unknown amount.
        check_size(path, max(size, max_bytes + 1), max_bytes, known=size > max_bytes)
    return read


def _read_filesystem(path: str, max_bytes: int | None) -> bytes:
    with filesystems(path).open(path, compression_type=_RAW) as handle:
        if max_bytes is None:
            return handle.read()
        if handle.seekable():  # an object's size is in the metadata its open fetched
            check_size(path, handle.seek(0, io.SEEK_END), max_bytes)
            handle.seek(0)
        data = handle.read(max_bytes + 1)
    check_size(path, len(data), max_bytes, known=False)
    return data


def open_stream(path: str, chunk_bytes: int) -> BinaryIO:
    """A seekable stream of an object: on Cloud Storage by ranged requests of `chunk_bytes`,
    never downloaded whole."""
    if gcs.is_gcs(path):
        return io.BufferedReader(gcs.RangeReader(path), buffer_size=chunk_bytes)
    return filesystems(path).open(path, compression_type=_RAW)


def create(path: str):
    """A binary write handle on an object."""
    return filesystems(path).create(path, compression_type=_RAW)


def size(path: str) -> int:
    if gcs.is_gcs(path):
        return gcs.stat(path).size
    return filesystems(path).match([path])[0].metadata_list[0].size_in_bytes


def identity(path: str) -> str:
    """An object's identity without reading it: on Cloud Storage its size and CRC-32C
    (gcs.identity), on another store its size and modification time."""
    if gcs.is_gcs(path):
        return gcs.stat(path).identity
    found = filesystems(path).match([path])[0].metadata_list
    if not found:
        raise FileNotFoundError(errno.ENOENT, "no such object", path)
    return f"{found[0].size_in_bytes}:{found[0].last_updated_in_seconds!r}"


def glob(pattern: str) -> list[str]:
    return sorted(match.path for match in filesystems(pattern).match([pattern])[0].metadata_list)
