"""Paths and file access that behave the same for local paths and `gs://` (Beam FileSystems).

Local paths take the plain `open`/`os` route: it is what FileSystems does underneath, minus a
layer of dispatch per image, and it keeps Beam (1.8 s to import) out of local runs altogether.
Everything else goes through FileSystems with compression detection off, so an image whose name
ends in `.gz` is never silently decompressed.
"""

import errno
import functools
import glob as local_glob
import io
import os
import posixpath
import time
from collections.abc import Iterator

_RAW = "uncompressed"  # Beam's CompressionTypes.UNCOMPRESSED
RETRIES = 4
RETRY_DELAY_S = 0.5  # doubled after each failed attempt: 0.5, 1, 2 s


@functools.cache
def _error_types() -> dict[str, tuple[type[BaseException], ...]]:
    """What file access raises, sorted once. Object stores raise their own exception types, not
    OSError; they are imported here, on first use, because with grpc they take 0.17 s, which a
    local run would pay in every process for the sake of a missing file."""
    from google.api_core import exceptions as gcs_errors

    transient = (
        gcs_errors.TooManyRequests,
        gcs_errors.InternalServerError,
        gcs_errors.BadGateway,
        gcs_errors.ServiceUnavailable,
        gcs_errors.GatewayTimeout,
        ConnectionError,
        TimeoutError,
    )
    return {
        "MISSING": (FileNotFoundError, gcs_errors.NotFound),
        "TRANSIENT": transient,
        "READ_ERRORS": (OSError, gcs_errors.GoogleAPICallError, *transient),
        # The service failed, not the path: what is left of a request after its retries.
        "UNAVAILABLE": (
            gcs_errors.TooManyRequests,
            gcs_errors.ResourceExhausted,
            gcs_errors.ServerError,
            gcs_errors.RetryError,
        ),
    }


def __getattr__(name: str):
    """`fileio.MISSING`, `fileio.TRANSIENT`, `fileio.READ_ERRORS`, `fileio.UNAVAILABLE`: tuples
    for `except`, which Python evaluates only when an exception is being matched."""
    if name in ("MISSING", "TRANSIENT", "READ_ERRORS", "UNAVAILABLE"):
        return _error_types()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _filesystems():
    """Beam's FileSystems, imported on first use: only remote paths need it."""
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def is_remote(path: str) -> bool:
    return "://" in path


def join(base: str, *parts: str) -> str:
    if is_remote(base):
        return posixpath.join(base, *parts)
    return os.path.join(base, *parts)


def dirname(path: str) -> str:
    return posixpath.dirname(path) if is_remote(path) else os.path.dirname(os.path.abspath(path))


def is_absolute(path: str) -> bool:
    """A scheme URI or an absolute local path: not relative to any folder."""
    return is_remote(path) or os.path.isabs(path)


def absolute(path: str) -> str:
    return path if is_absolute(path) else os.path.abspath(path)


def _read_remote(path: str) -> bytes:
    with _filesystems().open(path, compression_type=_RAW) as handle:
        return handle.read()


def _read_local(path: str) -> bytes:
    """A local file's bytes, in one read when it has the size it says: `open()` would build a
    buffered file object and ask whether the file is a terminal, 12-24 us an image."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(descriptor).st_size
        data = os.read(descriptor, size) if size else b""
        if size and len(data) == size:
            return data
        chunks = [data]  # a short read, or a file without a size: read on to the end
        while chunk := os.read(descriptor, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def read_bytes(path: str, retries: int = RETRIES) -> bytes:
    """The file's bytes; transient object-store errors are retried with backoff."""
    if not is_remote(path):
        return _read_local(path)
    for attempt in range(retries):
        try:
            return _read_remote(path)
        except _error_types()["TRANSIENT"]:
            if attempt == retries - 1:
                raise
            time.sleep(RETRY_DELAY_S * 2**attempt)
    raise AssertionError("unreachable")


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8-sig")


def open_text(path: str) -> io.TextIOBase:
    """A manifest as a text stream: UTF-8 without a BOM, line ends left as they are (as the
    csv module wants). A local file is streamed, never held whole (a 10-million-row manifest
    is 600 MB of text); a remote one is downloaded, with retries, and read from memory."""
    if is_remote(path):
        return io.StringIO(read_text(path), newline="")
    return open(path, encoding="utf-8-sig", newline="")  # noqa: SIM115 - the caller's to close


def create(path: str):
    """A binary write handle; local parent folders are created."""
    if is_remote(path):
        return _filesystems().create(path, compression_type=_RAW)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return open(path, "wb", buffering=1 << 20)


def write_bytes(path: str, data: bytes) -> None:
    with create(path) as handle:
        handle.write(data)


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
    if is_remote(path):
        return _filesystems().match([path])[0].metadata_list[0].size_in_bytes
    return os.path.getsize(path)


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


def walk(root: str) -> Iterator[str]:
    """Every file under `root` as a '/'-separated path relative to it, in sorted order."""
    if is_remote(root):
        prefix = root.rstrip("/") + "/"
        for path in glob(prefix + "**"):
            yield path[len(prefix) :]
        return
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(folder, root)
        for name in sorted(files):
            yield name if rel == "." else posixpath.join(*rel.split(os.sep), name)
