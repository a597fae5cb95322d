"""Objects. On Cloud Storage every request is the project's own client's (gcs.py): reads,
stats, existence checks, matches, server-side copies (a move's too) and deletions as single
requests of transforms/storage/jsonapi.py, uploads of transforms/storage/uploads.py (one
request for a small object, a resumable session for a shard): each a fraction of the CPU of
Beam's gcsio (benchmarks/gcs_request_cost.py), each retried by transforms/storage/retry.py's
`retried` alone. On any other store, everything through Beam's FileSystems, whose clients
retry their own requests (never `retried` as well).

Beam is imported on first use: only other stores need it, and it takes seconds to import.
Compression detection is off, so an image whose name ends in `.gz` is never silently
decompressed.
"""

import concurrent.futures
import contextlib
import errno
import functools
import io
import re
from typing import BinaryIO

from tfrecord_pipeline.transforms.storage import gcs, jsonapi, range_reader
from tfrecord_pipeline.transforms.storage.disk import check_size
from tfrecord_pipeline.transforms.storage.retry import retried

_WILDCARD = re.compile(r"[*?\[]")
DELETES_AT_ONCE = 32  # deletions of objects in flight: a folder may hold 10^5 of them

_RAW = "uncompressed"  # Beam's CompressionTypes.UNCOMPRESSED


def filesystems(path: str):
    """Beam's FileSystems, imported on first use, to reach `path` on a store other than Cloud
    Storage (whose requests are all gcs.py's)."""
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


def open_stream(
    path: str, chunk_bytes: int, read_through: int = 0, size: int | None = None
) -> BinaryIO:
    """A seekable stream of an object: on Cloud Storage read `chunk_bytes` at a time from
    ranged requests (range_reader.RangeReader, which reads on through forward seeks of up to
    `read_through` bytes), never downloaded whole."""
    if gcs.is_gcs(path):
        reader = range_reader.RangeReader(path, stop=size, read_through=read_through)
        return io.BufferedReader(reader, buffer_size=chunk_bytes)
    return filesystems(path).open(path, compression_type=_RAW)


def open_range(path: str, start: int, stop: int, read_through: int) -> BinaryIO:
    """Bytes [start, stop) of an object as one stream from `start`: on Cloud Storage one ranged
    request, read as asked, reading on through forward seeks of up to `read_through` bytes
    (range_reader.RangeReader)."""
    if gcs.is_gcs(path):
        stream = range_reader.RangeReader(path, stop=stop, read_through=read_through)
    else:
        stream = filesystems(path).open(path, compression_type=_RAW)
    stream.seek(start)
    return stream


def read_range(path: str, start: int, end: int) -> bytes:
    """Bytes `start` to `end` (exclusive) of an object: on Cloud Storage one ranged request
    (gcs.read_range), on another store a seek and a read."""
    if gcs.is_gcs(path):
        return gcs.read_range(path, start, end)
    with filesystems(path).open(path, compression_type=_RAW) as handle:
        handle.seek(start)
        return handle.read(end - start)


def create(path: str):
    """A binary write handle on an object, for one written as it is made (a shard, an errors
    file) under a name of its own: on Cloud Storage a resumable upload (gcs.create), which
    makes the object when the handle is closed, however the writing ended (it is not yet the
    file's final name)."""
    if gcs.is_gcs(path):
        return gcs.create(path)
    return filesystems(path).create(path, compression_type=_RAW)


def write(path: str, data: bytes) -> None:
    """An object holding `data`, whole or not at all: on Cloud Storage one upload (gcs.write),
    sent again whole after a transient failure."""
    if gcs.is_gcs(path):
        gcs.write(path, data)
        return
    with create(path) as handle:
        handle.write(data)


def copy(source: str, destination: str) -> None:
    """A server-side copy (Cloud Storage checks its CRC-32C) in one request, sent again after a
    transient failure: it makes the same object (jsonapi.copy)."""
    if not gcs.is_gcs(source):
        filesystems(source).copy([source], [destination])
        return
    retried(lambda: jsonapi.copy(source, destination), source)


def rename(source: str, destination: str) -> None:
    """A copy, then the source deleted, as Beam's gcsio moves an object: each sent again
    after a transient failure (the deletion of a source gone already is done)."""
    if not gcs.is_gcs(source):
        filesystems(source).rename([source], [destination])
        return
    copy(source, destination)
    delete([source])


def delete(paths: list[str]) -> None:
    """Delete objects, DELETES_AT_ONCE at a time on Cloud Storage, each one request
    (jsonapi.delete); one already gone is not an error (a deletion retried after its answer was
    lost finds it so)."""
    if not paths:
        return
    if not gcs.is_gcs(paths[0]):
        filesystems(paths[0]).delete(paths)
        return

    def one(path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            retried(lambda: jsonapi.delete(path), path)

    if len(paths) == 1:  # a move's: no pool to start
        one(paths[0])
        return
    with concurrent.futures.ThreadPoolExecutor(min(len(paths), DELETES_AT_ONCE)) as pool:
        list(pool.map(one, paths))


def exists(path: str) -> bool:
    """Whether an object is there: on Cloud Storage from its metadata (one request)."""
    if not gcs.is_gcs(path):
        return filesystems(path).exists(path)
    try:
        gcs.stat(path)
    except FileNotFoundError:
        return False
    return True


def size(path: str) -> int:
    if gcs.is_gcs(path):
        return gcs.stat(path).size
    return filesystems(path).match([path])[0].metadata_list[0].size_in_bytes


def identity(path: str) -> str:
    """An object's identity without reading it: on Cloud Storage its size and CRC-32C
    (gcs.identity), on another store its size and modification time."""
    return stat(path)[1]


def stat(path: str) -> tuple[int, str]:
    """An object's size and identity (`identity`), with one request."""
    if gcs.is_gcs(path):
        return tuple(gcs.stat(path))
    found = filesystems(path).match([path])[0].metadata_list
    if not found:
        raise FileNotFoundError(errno.ENOENT, "no such object", path)
    return found[0].size_in_bytes, f"{found[0].size_in_bytes}:{found[0].last_updated_in_seconds!r}"


def glob(pattern: str) -> list[str]:
    """The objects matching `pattern` in Beam's syntax (`*` within a folder, `**` across
    folders), sorted: on Cloud Storage from the pages of one listing (jsonapi.list_page, each
    retried) of every name from the pattern's first wildcard on, filtered as Beam filters its
    own listing."""
    if not gcs.is_gcs(pattern):
        return sorted(m.path for m in filesystems(pattern).match([pattern])[0].metadata_list)
    wildcard = _WILDCARD.search(pattern)
    if wildcard is None:
        return [pattern] if exists(pattern) else []
    from apache_beam.io.filesystem import FileSystem

    bucket, prefix = gcs.split(pattern[: wildcard.start()])
    matches = re.compile(FileSystem.translate_pattern(pattern)).match
    found, token = [], None
    while True:
        page = functools.partial(jsonapi.list_page, bucket, prefix, "", token, None)
        listed = retried(page, pattern)
        for name, stat in zip(listed.names, gcs.listed_stats(listed), strict=True):
            if matches(path := f"gs://{bucket}/{name}"):
                found.append(path)
                gcs.remember_stat(path, stat)  # what the launcher may take as an archive's
        token = listed.next_token
        if not token:
            return sorted(found)
