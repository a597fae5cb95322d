"""Paths and file access that behave the same for local paths and `gs://` (Beam FileSystems).

Local paths take the plain `open`/`os` route: it is what FileSystems does underneath, minus a
layer of dispatch per image. Everything else goes through FileSystems with compression detection
off, so an image whose name ends in `.gz` is never silently decompressed.
"""

import os
import posixpath
import time
from collections.abc import Iterator

from google.api_core import exceptions as gcs_errors

_RAW = "uncompressed"  # Beam's CompressionTypes.UNCOMPRESSED
# Object stores raise their own exception types, not OSError: sort them once, here.
MISSING = (FileNotFoundError, gcs_errors.NotFound)
TRANSIENT = (
    gcs_errors.TooManyRequests,
    gcs_errors.InternalServerError,
    gcs_errors.BadGateway,
    gcs_errors.ServiceUnavailable,
    gcs_errors.GatewayTimeout,
    ConnectionError,
    TimeoutError,
)
READ_ERRORS = (OSError, gcs_errors.GoogleAPICallError, *TRANSIENT)
RETRIES = 4
RETRY_DELAY_S = 0.5  # doubled after each failed attempt: 0.5, 1, 2 s


def _filesystems():
    """Beam's FileSystems, imported on first use: the shard-writer processes of a local run
    (transforms/shard_processes.py) only see local paths, and Beam takes them 1.8 s to import."""
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


def resolve(path: str, base_dir: str) -> str:
    """A manifest's image path: absolute and scheme paths as given, others under `base_dir`."""
    if is_remote(path) or os.path.isabs(path):
        return path
    return join(base_dir, path)


def _read_remote(path: str) -> bytes:
    with _filesystems().open(path, compression_type=_RAW) as handle:
        return handle.read()


def read_bytes(path: str, retries: int = RETRIES) -> bytes:
    """The file's bytes; transient object-store errors are retried with backoff."""
    if not is_remote(path):
        with open(path, "rb") as handle:
            return handle.read()
    for attempt in range(retries):
        try:
            return _read_remote(path)
        except TRANSIENT:
            if attempt == retries - 1:
                raise
            time.sleep(RETRY_DELAY_S * 2**attempt)
    raise AssertionError("unreachable")


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8-sig")


def create(path: str):
    """A binary write handle; local parent folders are created."""
    if is_remote(path):
        return _filesystems().create(path, compression_type=_RAW)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return open(path, "wb", buffering=1 << 20)


def write_bytes(path: str, data: bytes) -> None:
    with create(path) as handle:
        handle.write(data)


def exists(path: str) -> bool:
    return _filesystems().exists(path)


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
    if paths:
        _filesystems().delete(paths)


def glob(pattern: str) -> list[str]:
    """Paths matching `pattern`, sorted."""
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
