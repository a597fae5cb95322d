"""Paths and file access that behave the same for local paths and `gs://`.

Each function here answers for both kinds of path; the work is done by
transforms/storage/disk.py (local files: the plain `open`/`os` route, which is what Beam's
FileSystems does underneath, minus a layer of dispatch per image, and which keeps Beam, seconds
to import, out of local runs altogether) and transforms/storage/remote.py (objects; a `gs://`
folder is listed by transforms/storage/gcs.py).
"""

import contextlib
import glob as local_glob
import os
import posixpath
import shutil
from typing import BinaryIO

from tfrecord_pipeline.transforms.storage import disk, gcs, remote
from tfrecord_pipeline.transforms.storage.retry import StoreUnavailableError

# What file access raises, for `except`: every store's failures are OSErrors (Cloud Storage's
# as transforms/storage/answers.py raises them; Beam's FileSystems', for another store, too).
MISSING = (FileNotFoundError,)
READ_ERRORS = (OSError,)
# The service failed, not the path: what is left of a request after its retries.
UNAVAILABLE = (StoreUnavailableError,)


def is_remote(path: str) -> bool:
    return "://" in path


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


def read_bytes(path: str, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file or an object: disk.FileTooLargeError beyond `max_bytes`,
    disk.NotAFileError for anything else a local path names. Transient Cloud Storage errors are
    retried (transforms/storage/retry.py)."""
    return read_identified(path, max_bytes)[0]


def read_identified(path: str, max_bytes: int | None = None) -> tuple[bytes, str]:
    """`read_bytes`, and the file's `identity` as it was when the read began (an object's, as
    the read's own response gives it)."""
    if is_remote(path):
        return remote.read(path, max_bytes)
    return disk.read(path, max_bytes)


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8-sig")


def open_bytes(
    path: str, chunk_bytes: int, read_through: int = 0, size: int | None = None
) -> BinaryIO:
    """A seekable binary stream that reads what it is asked and no more: a local regular file
    unbuffered; a `gs://` object `chunk_bytes` at a time from ranged requests (RangeReader,
    transforms/storage/range_reader.py, retried as every read of an object), never downloaded
    whole. For manifests, which can be many gigabytes, and archives (`read_through`; `size`,
    when known, spares an object's stat)."""
    if is_remote(path):
        return remote.open_stream(path, chunk_bytes, read_through, size)
    descriptor, _ = disk.open_regular(path)
    return open(descriptor, "rb", buffering=0)  # noqa: SIM115 - the caller's to close


def create(path: str):
    """A binary write handle; local parent folders are created."""
    return remote.create(path) if is_remote(path) else disk.create(path)


def write_bytes(path: str, data: bytes) -> None:
    """A file holding `data`; an object whole or not at all (remote.write)."""
    if is_remote(path):
        remote.write(path, data)
        return
    with create(path) as handle:
        handle.write(data)


def write_synced(path: str, data: bytes) -> None:
    """Write a staged file and flush it to its disk before it is described to anyone: its name
    is its attempt's own, so unlike `write_durably` it needs no rename."""
    write_bytes(path, data)
    sync_file(path)


def write_durably(path: str, data: bytes) -> None:
    """Write a file that readers see whole or not at all, and that survives a crash once this
    returns: an object write is both; a local file is written beside, flushed and renamed."""
    if is_remote(path):
        write_bytes(path, data)
    else:
        disk.write_durably(path, data)


def sync_file(path: str) -> None:
    """Flush a local file's data, or a local folder's entries (names created or renamed in it),
    to its disk; object stores persist a write before it returns."""
    if not is_remote(path):
        disk.sync_file(path)


def names_in(folder: str) -> list[str]:
    """The names directly in `folder`, sorted: files, and subfolders (object-store prefixes)
    once each; none when it does not exist."""
    if not is_remote(folder):
        return sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    return sorted({name for name, _ in gcs.list_folder(folder)})


def delete_tree(folder: str) -> None:
    """Delete `folder` and everything in it (every object under the prefix). Another process
    may be deleting the same folder at the same time (a run that lost deletes its own folders
    while the winner's clean-up deletes them too): what it deleted first is not an error. On
    a disk a first pass lets entries vanish under it, and a second, over anything left, says
    why it could not be deleted. On Cloud Storage an object already gone, or gone between the
    listing and its deletion, counts as deleted."""
    if not is_remote(folder):
        shutil.rmtree(folder, ignore_errors=True)
        if os.path.lexists(folder):
            shutil.rmtree(folder)
        return
    delete(glob(folder.rstrip("/") + "/**"))


def check_writable_folder(path: str) -> None:
    """Raise OSError unless local `path` is a folder this process may write in, or one it may
    make. An object store has no folders: its paths are checked by the first write."""
    if not is_remote(path):
        disk.check_writable_folder(path)


def exists(path: str) -> bool:
    return remote.exists(path) if is_remote(path) else os.path.exists(path)


def not_there(path: str, folder: bool = False) -> str:
    """How a path that is not there is told: the first folder of a local path that is missing
    (a typo in a folder's name) as `no such folder: F`, else `no such file: path` (`no such
    folder` when `folder`). An object store has no folders to tell apart."""
    missing = path
    if not is_remote(path):
        missing = parent = os.path.normpath(path)
        while (parent := os.path.dirname(parent)) and not os.path.exists(parent):
            missing = parent
        folder = folder or missing != os.path.normpath(path)
    return f"no such {'folder' if folder else 'file'}: {missing}"


def is_dir(path: str) -> bool:
    """Local folders, or a `gs://` prefix ending in `/`."""
    return path.endswith("/") if is_remote(path) else os.path.isdir(path)


def size(path: str) -> int:
    return remote.size(path) if is_remote(path) else os.path.getsize(path)


def stat(path: str) -> tuple[int, str]:
    """A file's size and identity (`identity`), with one stat: one request on a store."""
    if is_remote(path):
        return remote.stat(path)
    status = os.stat(path)
    return status.st_size, disk.identity(status)


def identity(path: str) -> str:
    """What tells a file's versions apart without reading it (disk.identity, remote.identity):
    the same string as the identity `read_identified` gives."""
    return stat(path)[1]


def staged_name(name: str) -> str:
    """`name` with a random suffix: a staged file of this attempt's own, so a retried or
    speculative attempt at the same file writes beside it, never over it."""
    return f"{name}.{os.urandom(16).hex()}"


def copy(source: str, destination: str) -> None:
    """A copy of a file of its own (never a second name for the same bytes), without passing
    them through this process where the store can: a server-side copy on a store (Cloud
    Storage checks its CRC-32C), the kernel's copy (a reflink where it can) on a local disk."""
    if is_remote(source):
        remote.copy(source, destination)
    else:
        disk.copy(source, destination)


def rename(source: str, destination: str) -> None:
    if is_remote(source):
        remote.rename(source, destination)
    else:
        os.replace(source, destination)


def delete(paths: list[str]) -> None:
    """Deletes files; a local path that is already gone is not an error (as on GCS)."""
    remote.delete([path for path in paths if is_remote(path)])
    for path in paths:
        if not is_remote(path):
            with contextlib.suppress(FileNotFoundError):  # another deleted it meanwhile
                os.remove(path)


def glob(pattern: str) -> list[str]:
    """Files matching `pattern` (`**` crosses folders), sorted."""
    if is_remote(pattern):
        return remote.glob(pattern)
    return sorted(path for path in local_glob.glob(pattern, recursive=True) if os.path.isfile(path))
