"""Local files, read and written as a hostile file system allows.

A path in a manifest can name anything: a FIFO that waits forever for a writer, `/dev/zero`
that never ends, a sparse file of a terabyte, a procfs file that says it is empty. So a read
opens regular files only, and never reads past its size limit (`check_size` holds that limit
for objects too). A write that must survive a crash is written beside, flushed to the disk and
renamed over. A walk of a folder tree follows symlinked folders once each, so a link loop ends.
"""

import contextlib
import errno
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from typing import NamedTuple

from tfrecord_pipeline.transforms.storage import write_behind


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


def check_size(path: str, size: int, max_bytes: int | None, known: bool = True) -> None:
    """FileTooLargeError when `size` is over `max_bytes`; `known`: the size is the file's, not
    only how much of it was read."""
    if max_bytes is not None and size > max_bytes:
        what = f"{size:,} bytes" if known else "larger than that"
        raise FileTooLargeError(f"{path}: {what}, over the limit of {max_bytes:,} bytes")


def open_regular(path: str) -> tuple[int, os.stat_result]:
    """A descriptor for reading the regular file at `path`, and its status. Symlinks are
    followed (linked images are common). The path is checked before the open, because opening
    a device can act on it (a tape rewinds, a watchdog arms), and the descriptor after, in case
    the path was replaced in between."""
    _check_regular(path, os.stat(path).st_mode)
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        status = os.fstat(descriptor)
        _check_regular(path, status.st_mode)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor, status


def identity(status: os.stat_result) -> str:
    """What tells a local file's versions apart without reading it: its size and modification
    time, which equal the same bytes unless a writer kept both, as tools that rewrite images
    do not."""
    return f"{status.st_size}:{status.st_mtime_ns}"


def read(path: str, max_bytes: int | None) -> tuple[bytes, str]:
    """A regular file's bytes, in one read when it has the size it says (`open()` would build
    a buffered file object and ask whether the file is a terminal, for every image), and its
    identity as the read began."""
    return read_open(path, *open_regular(path), max_bytes)


def read_open(
    path: str, descriptor: int, status: os.stat_result, max_bytes: int | None
) -> tuple[bytes, str]:
    """`read`, of the file `open_regular` gave `descriptor` and `status` for; it closes it."""
    size = status.st_size
    try:
        check_size(path, size, max_bytes)
        data = os.read(descriptor, size) if size else b""
        if size and len(data) == size:
            return data, identity(status)
        # A short read, or a file without a size (procfs): read on, never past the limit.
        chunks, total = [data], len(data)
        limit = sys.maxsize - 1 if max_bytes is None else max_bytes
        while total <= limit and (chunk := os.read(descriptor, min(_CHUNK, limit + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
        check_size(path, total, max_bytes, known=False)
        return b"".join(chunks), identity(status)
    finally:
        os.close(descriptor)


def create(path: str):
    """A binary write handle, its parent folders created; its bytes written behind, where the
    system can (write_behind.py)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return write_behind.open_new(path, buffer_bytes=1 << 20)


def write_durably(path: str, data: bytes) -> None:
    """Write a file beside `path`, flush it to the disk and rename it over: a kill or a full
    disk mid-write leaves no empty or short file behind, and once this returns it survives a
    crash."""
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
    sync_file(os.path.dirname(os.path.abspath(path)))


def sync_file(path: str) -> None:
    """Flush a file's data, or a folder's entries (names created or renamed in it), to its
    disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def check_writable_folder(path: str) -> None:
    """Raise OSError unless `path` is a folder this process may write in, or one it may make
    (its nearest existing parent is such a folder)."""
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise NotADirectoryError(errno.ENOTDIR, "a file, not a folder", existing)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "no permission to write in it", existing)


def copy(source: str, destination: str) -> None:
    """A copy of a file's bytes of its own, never a second name for the same ones (a write into
    one would change the other), flushed to the disk like every file a version is made of."""
    concatenate([source], destination)
    sync_file(destination)


def concatenate(sources: list[str], destination: str, append: bool = False) -> None:
    """`destination` made of `sources`' bytes one after another (`append`: after its own), its
    folders created. The kernel copies (`copy_file_range`): a reflink, instant and sharing
    blocks until one is written, where the file system has them (Btrfs, XFS); else no byte
    passes through this process. Where the kernel cannot (another file system, an old
    kernel), a plain copy."""
    with contextlib.ExitStack() as stack:  # every source opened first: a missing one makes none
        readers = [stack.enter_context(open(source, "rb", buffering=0)) for source in sources]
        os.makedirs(os.path.dirname(os.path.abspath(destination)), exist_ok=True)
        # Not O_APPEND, which copy_file_range refuses: the end sought.
        writer = stack.enter_context(open(destination, "r+b" if append else "wb", buffering=0))
        writer.seek(0, os.SEEK_END)
        for reader in readers:
            _append(reader, writer)


def _append(reader, writer) -> None:
    """`reader`'s bytes written on at `writer`'s position (both unbuffered: the kernel moves
    their offsets)."""
    start = writer.tell()
    try:
        while os.copy_file_range(reader.fileno(), writer.fileno(), 1 << 30):
            pass
    except OSError as error:
        if error.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
        reader.seek(0)
        writer.seek(start)
        writer.truncate()
        shutil.copyfileobj(reader, writer, _CHUNK)


class Unlisted(NamedTuple):
    """A folder `walk` did not list: deeper than asked (no `error`, no `same_as`), one it could
    not list (`error`), or one it had listed already under the path `same_as`."""

    path: str  # '/'-separated, relative to the root; "." is the root
    error: str = ""
    same_as: str = ""


def walk(root: str, depth: int) -> Iterator[str | Unlisted]:
    """Every entry under folder `root` that is not a folder, as a '/'-separated path relative
    to it, in sorted order, and an `Unlisted` for each folder not listed. Folders are listed
    down to `depth` levels below the root; symlinked folders are followed, each folder once (by
    device and inode), so a link loop ends and no file is listed twice."""
    yield from _walk(root, ".", depth, {})


def _walk(folder: str, relative: str, depth: int, seen: dict) -> Iterator[str | Unlisted]:
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
            yield from _walk(entry.path, path, depth - 1, seen)
        else:
            yield Unlisted(path)


def _is_folder(entry: os.DirEntry) -> bool:
    """Whether the entry is a folder or a link to one. A link whose target cannot be looked at
    counts as a folder: listing it then reports why."""
    try:
        return entry.is_dir()
    except OSError:
        return True
