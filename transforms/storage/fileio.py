"""Paths and file access that behave the same for local paths and `gs://` (Beam FileSystems).

Local paths take the plain `open`/`os` route: it is what FileSystems does underneath, minus a
layer of dispatch per image, and it keeps Beam (seconds to import) out of local runs altogether.
Everything else goes through FileSystems with compression detection off, so an image whose name
ends in `.gz` is never silently decompressed.
"""

import base64
import contextlib
import errno
import functools
import glob as local_glob
import io
import os
import posixpath
import shutil
import stat
import sys
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

import google_crc32c

from transforms.storage import gcs

_RAW = "uncompressed"  # Beam's CompressionTypes.UNCOMPRESSED


@functools.cache
def _error_types() -> dict[str, tuple[type[BaseException], ...]]:
    """What file access raises, sorted once. Object stores raise their own exception types, not
    OSError; they are imported here, on first use, because with grpc they are slow to import,
    which a local run would pay in every process for the sake of a missing file. (Which failures are
    transient, and retried, is transforms/storage/gcs.py's to say.)"""
    from google.api_core import exceptions as gcs_errors

    return {
        "MISSING": (FileNotFoundError, gcs_errors.NotFound),
        "READ_ERRORS": (OSError, gcs_errors.GoogleAPICallError),
        # The service failed, not the path: what is left of a request after its retries.
        "UNAVAILABLE": (
            gcs_errors.TooManyRequests,
            gcs_errors.ResourceExhausted,
            gcs_errors.ServerError,
            gcs_errors.RetryError,
        ),
    }


def __getattr__(name: str):
    """`fileio.MISSING`, `fileio.READ_ERRORS`, `fileio.UNAVAILABLE`: tuples for `except`, which
    Python evaluates only when an exception is being matched."""
    if name in ("MISSING", "READ_ERRORS", "UNAVAILABLE"):
        return _error_types()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _filesystems():
    """Beam's FileSystems, imported on first use: only remote paths need it."""
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def is_remote(path: str) -> bool:
    return "://" in path


def is_gcs(path: str) -> bool:
    return path.startswith("gs://")


def join(base: str, *parts: str) -> str:
    if is_remote(base):
        return posixpath.join(base, *parts)
    return os.path.join(base, *parts)


def dirname(path: str) -> str:
    return posixpath.dirname(path) if is_remote(path) else os.path.dirname(os.path.abspath(path))


def is_absolute(path: str) -> bool:
    """A scheme URI or an absolute local (POSIX) path: not relative to any folder."""
    return "://" in path or path.startswith("/")


def absolute(path: str) -> str:
    return path if is_absolute(path) else os.path.abspath(path)


class NotAFileError(OSError):
    """The path names a FIFO, socket, device or folder. Such a path is never read: a FIFO
    without a writer waits forever, and `/dev/zero` never ends."""


class FileTooLargeError(OSError):
    """The file is over the size limit; no more than the limit and one byte of it was read."""


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
# O_NONBLOCK: an open that meets a FIFO (put there after the stat) returns at once, not when a
# writer comes; it changes nothing for a regular file. O_NOCTTY: a terminal never becomes ours.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_BINARY", 0)
)
_CHUNK = 1 << 20


def _check_regular(path: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for is_kind, name in _KINDS if is_kind(mode)), "a special file")
        raise NotAFileError(f"{path} is {kind}, not a regular file")


def _check_size(path: str, size: int, max_bytes: int | None, known: bool = True) -> None:
    if max_bytes is not None and size > max_bytes:
        what = f"{size:,} bytes" if known else "larger than that"
        raise FileTooLargeError(f"{path}: {what}, over the limit of {max_bytes:,} bytes")


def _open_regular(path: str) -> tuple[int, os.stat_result]:
    """A descriptor for reading the regular file at `path`, and its size. Symlinks are followed
    (linked images are common). The path is checked before the open, because opening a device
    can act on it (a tape rewinds, a watchdog arms), and the descriptor after, in case the path
    was replaced in between."""
    _check_regular(path, os.stat(path).st_mode)
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        status = os.fstat(descriptor)
        _check_regular(path, status.st_mode)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor, status


def _read_remote(path: str, max_bytes: int | None) -> tuple[bytes, str]:
    """An object's bytes and identity: on Cloud Storage from one request
    (transforms/storage/gcs.py), on another store a stat, then a read through Beam's FileSystems.
    Transient failures are retried; gcs.StoreUnavailableError when they go on."""
    if not is_gcs(path):
        identity_before = identity(path)
        return gcs.retried(lambda: _read_filesystem(path, max_bytes), path), identity_before
    read = gcs.read(path, max_bytes)
    if read is None:  # over the limit: its metadata says by how much (a second request)
        size = gcs.stat(path).size
        # Within the limit now, it was replaced meanwhile: over it still, by an unknown amount.
        _check_size(path, max(size, max_bytes + 1), max_bytes, known=size > max_bytes)
    return read


def _read_filesystem(path: str, max_bytes: int | None) -> bytes:
    with _filesystems().open(path, compression_type=_RAW) as handle:
        if max_bytes is None:
            return handle.read()
        if handle.seekable():  # an object's size is in the metadata its open fetched
            _check_size(path, handle.seek(0, io.SEEK_END), max_bytes)
            handle.seek(0)
        data = handle.read(max_bytes + 1)
    _check_size(path, len(data), max_bytes, known=False)
    return data


def _read_local(path: str, max_bytes: int | None) -> bytes:
    """A local regular file's bytes, in one read when it has the size it says: `open()` would
    build a buffered file object and ask whether the file is a terminal, for every image."""
    return _read_local_identified(path, max_bytes)[0]


def _read_local_identified(path: str, max_bytes: int | None) -> tuple[bytes, str]:
    descriptor, status = _open_regular(path)
    size = status.st_size
    identity = f"{size}:{status.st_mtime_ns}"
    try:
        _check_size(path, size, max_bytes)
        data = os.read(descriptor, size) if size else b""
        if size and len(data) == size:
            return data, identity
        # A short read, or a file without a size (procfs): read on, never past the limit.
        chunks, total = [data], len(data)
        limit = sys.maxsize - 1 if max_bytes is None else max_bytes
        while total <= limit and (chunk := os.read(descriptor, min(_CHUNK, limit + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
        _check_size(path, total, max_bytes, known=False)
        return b"".join(chunks), identity
    finally:
        os.close(descriptor)


def read_bytes(path: str, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file or an object: FileTooLargeError beyond `max_bytes`,
    NotAFileError for anything else a local path names. Transient object-store errors are
    retried (transforms/storage/gcs.py)."""
    if not is_remote(path):
        return _read_local(path, max_bytes)
    return _read_remote(path, max_bytes)[0]


def read_identified(path: str, max_bytes: int | None = None) -> tuple[bytes, str]:
    """`read_bytes`, and the file's `identity` as it was when the read began (an object's, as
    the read's own response gives it)."""
    if is_remote(path):
        return _read_remote(path, max_bytes)
    return _read_local_identified(path, max_bytes)


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8-sig")


def open_bytes(path: str, chunk_bytes: int) -> BinaryIO:
    """A seekable binary stream that reads what it is asked and no more: a local regular file
    unbuffered; a `gs://` object by ranged requests of `chunk_bytes` (retried as every read of
    an object), never downloaded whole. For manifests, which can be many gigabytes."""
    if path.startswith("gs://"):
        return io.BufferedReader(gcs.RangeReader(path), buffer_size=chunk_bytes)
    if is_remote(path):
        return _filesystems().open(path, compression_type=_RAW)
    descriptor, _ = _open_regular(path)
    return open(descriptor, "rb", buffering=0)  # noqa: SIM115 - the caller's to close


def create(path: str):
    """A binary write handle; local parent folders are created."""
    if is_remote(path):
        return _filesystems().create(path, compression_type=_RAW)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return open(path, "wb", buffering=1 << 20)


def write_bytes(path: str, data: bytes) -> None:
    with create(path) as handle:
        handle.write(data)


def write_durably(path: str, data: bytes) -> None:
    """Write a file that readers see whole or not at all, and that survives a crash once this
    returns: an object write is both; a local file is written beside, flushed to the disk, and
    renamed over (a kill or a full disk mid-write leaves no empty or short file behind)."""
    if is_remote(path):
        write_bytes(path, data)
        return
    temp = f"{path}.tmp-{os.urandom(8).hex()}"
    try:
        with create(temp) as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temp)
        raise
    sync_folder(os.path.dirname(os.path.abspath(path)))


def sync_file(path: str) -> None:
    """Flush a local file's data to its disk (object stores persist a write before it returns)."""
    if is_remote(path):
        return
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def sync_folder(path: str) -> None:
    """Flush a local folder's entries (names created or renamed in it) to its disk."""
    if not is_remote(path):
        sync_file(path)


def names_in(folder: str) -> list[str]:
    """The names directly in `folder`, sorted: files, and subfolders (object-store prefixes)
    once each; none when it does not exist."""
    if not is_remote(folder):
        return sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    return sorted({name for name, _ in list_prefix(folder)})


def _bucket_and_prefix(folder: str) -> tuple[str, str]:
    """A `gs://` folder's bucket, and the prefix its objects' names start with ("" at the top)."""
    bucket, _, prefix = folder.removeprefix("gs://").partition("/")
    return bucket, prefix.rstrip("/") + "/" if prefix.strip("/") else ""


def list_prefix(folder: str) -> Iterator[tuple[str, bool]]:
    """(name, whether a subfolder) of what is directly in a `gs://` folder: its objects as the
    listing streams them (in name order, a page at a time), then its subfolders (prefixes)."""
    bucket, prefix = _bucket_and_prefix(folder)
    listing = gcs.client().list_blobs(bucket, prefix=prefix, delimiter="/")
    for blob in listing:
        if name := blob.name[len(prefix) :]:  # not the folder's own placeholder object
            yield name, False
    for sub in sorted(listing.prefixes):
        yield sub[len(prefix) :].rstrip("/"), True


def holds_objects(folder: str) -> bool:
    """Whether any object's name starts with a `gs://` folder's prefix (one listed, not all)."""
    bucket, prefix = _bucket_and_prefix(folder)
    return any(True for _ in gcs.client().list_blobs(bucket, prefix=prefix, max_results=1))


def delete_tree(folder: str) -> None:
    """Delete `folder` and everything in it (every object under the prefix)."""
    if not is_remote(folder):
        if os.path.lexists(folder):
            shutil.rmtree(folder)
        return
    delete(glob(folder.rstrip("/") + "/**"))


def check_writable_folder(path: str) -> None:
    """Raise OSError unless local `path` is a folder this process may write in, or one it may
    make (its nearest existing parent is such a folder). An object store has no folders: its
    paths are checked by the first write."""
    if is_remote(path):
        return
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise NotADirectoryError(errno.ENOTDIR, "a file, not a folder", existing)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "no permission to write in it", existing)


def exists(path: str) -> bool:
    return _filesystems().exists(path) if is_remote(path) else os.path.exists(path)


def is_dir(path: str) -> bool:
    """Local folders, or a `gs://` prefix ending in `/`."""
    return path.endswith("/") if is_remote(path) else os.path.isdir(path)


def size(path: str) -> int:
    if is_gcs(path):
        return gcs.stat(path).size
    if is_remote(path):
        return _filesystems().match([path])[0].metadata_list[0].size_in_bytes
    return os.path.getsize(path)


def identity(path: str) -> str:
    """What tells a file's versions apart without reading it: its size and modification time,
    which equal the same bytes unless a writer kept both, as tools that rewrite images do not;
    on Cloud Storage its size and CRC-32C (gcs.identity). The same string as the identity
    `read_identified` gives."""
    if is_gcs(path):
        return gcs.stat(path).identity
    if is_remote(path):
        found = _filesystems().match([path])[0].metadata_list
        if not found:
            raise FileNotFoundError(errno.ENOENT, "no such object", path)
        return f"{found[0].size_in_bytes}:{found[0].last_updated_in_seconds!r}"
    status = os.stat(path)
    return f"{status.st_size}:{status.st_mtime_ns}"


JOIN_CHUNK_BYTES = 8 << 20


def join_files(sources: list[str], destination: str) -> int:
    """`destination` made of `sources`' bytes one after another; returns its CRC-32C. Objects
    are composed by the store (no byte passes through this process), 32 a request; local
    files are streamed through."""
    if is_remote(destination):
        return _compose(sources, destination)
    crc = 0
    with create(destination) as out:
        for source in sources:
            with open(source, "rb") as handle:
                while chunk := handle.read(JOIN_CHUNK_BYTES):
                    crc = google_crc32c.extend(crc, chunk)
                    out.write(chunk)
    return crc


_COMPOSE_LIMIT = 32  # source objects in one compose request


def _compose(sources: list[str], destination: str) -> int:
    from google.api_core.retry import Retry

    bucket_name, _, name = destination.removeprefix("gs://").partition("/")
    bucket = gcs.client().bucket(bucket_name)
    target = bucket.blob(name)
    pending = [bucket.blob(source.removeprefix(f"gs://{bucket_name}/")) for source in sources]
    joined: list = []  # the target itself, from the second request on
    while pending:
        take = _COMPOSE_LIMIT - len(joined)
        target.compose([*joined, *pending[:take]], retry=Retry())  # a new name: safe to retry
        joined, pending = [target], pending[take:]
    return int.from_bytes(base64.b64decode(target.crc32c), "big")


def copy(source: str, destination: str) -> None:
    """A new name for a file's bytes without passing them through this process: a hard link
    on a local disk (a copy where links cannot be made), a server-side copy on a store."""
    if is_remote(source):
        _filesystems().copy([source], [destination])
        return
    os.makedirs(os.path.dirname(os.path.abspath(destination)), exist_ok=True)
    try:
        os.link(source, destination)
    except OSError as error:
        if error.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        shutil.copyfile(source, destination)


def rename(source: str, destination: str) -> None:
    if is_remote(source):
        _filesystems().rename([source], [destination])
    else:
        os.replace(source, destination)


def delete(paths: list[str]) -> None:
    """Deletes files; a local path that is already gone is not an error (as on GCS)."""
    remote = [path for path in paths if is_remote(path)]
    if remote:
        _filesystems().delete(remote)
    for path in paths:
        if not is_remote(path) and os.path.exists(path):
            os.remove(path)


def glob(pattern: str) -> list[str]:
    """Files matching `pattern` (`**` crosses folders), sorted."""
    if not is_remote(pattern):
        matched = local_glob.glob(pattern, recursive=True)
        return sorted(path for path in matched if os.path.isfile(path))
    return sorted(m.path for m in _filesystems().match([pattern])[0].metadata_list)


class Unlisted(NamedTuple):
    """A folder `walk` did not list: deeper than asked (no `error`, no `same_as`), one it could
    not list (`error`), or one it had listed already under the path `same_as`."""

    path: str  # '/'-separated, relative to the root; "." is the root
    error: str = ""
    same_as: str = ""


def walk(root: str, depth: int) -> Iterator[str | Unlisted]:
    """Every entry under local folder `root` that is not a folder, as a '/'-separated path
    relative to it, in sorted order, and an `Unlisted` for each folder not listed. Folders are
    listed down to `depth` levels below the root; symlinked folders are followed, each folder
    once (by device and inode), so a link loop ends and no file is listed twice."""
    yield from _walk_local(root, ".", depth, {})


def _walk_local(folder: str, relative: str, depth: int, seen: dict) -> Iterator[str | Unlisted]:
    try:
        status = os.stat(folder)
        first = seen.setdefault((status.st_dev, status.st_ino), relative)
        if first != relative:
            yield Unlisted(relative, same_as=first)
            return
        with os.scandir(folder) as listing:
            entries = sorted((entry.name, entry) for entry in listing)
    except OSError as error:
        yield Unlisted(relative, error=error.strerror or str(error))
        return
    for name, entry in entries:
        path = name if relative == "." else f"{relative}/{name}"
        if not _is_folder(entry):
            yield path
        elif depth:
            yield from _walk_local(entry.path, path, depth - 1, seen)
        else:
            yield Unlisted(path)


def _is_folder(entry: os.DirEntry) -> bool:
    """Whether the entry is a folder or a link to one. A link whose target cannot be looked at
    counts as a folder: listing it then reports why."""
    try:
        return entry.is_dir()
    except OSError:
        return True
