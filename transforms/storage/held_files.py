"""Archive files held open by each thread that reads their members, so that a member costs one
positioned read and a status check (os.pread, os.fstat), as a loose file costs an open and a
read: a file opened for every member also costs a stat, an open and a close (on a local disk,
about 7 µs of a member's 12).

Each thread holds its own HELD most recently read files (threading.local), so none closes a
descriptor another is reading from. A held file is read only while its identity (size and
modification time) is the one its members were listed with: one rewritten in place since is
opened again, which finds the file now at its path (replaced under the same name, it may be
the listed one again), and if that differs too its member is not read.
"""

import io
import os
import threading

from tfrecord_pipeline.transforms.storage import disk

HELD = 16  # files a thread holds open: a shard's rows, mixed, come from every archive
_threads = threading.local()  # its `held`: path → file, closed when dropped (its thread ended)


def read_listed(path: str, start: int, end: int, listed: str) -> bytes | None:
    """Bytes [start, end) of the local file at `path`, or None when its identity is no longer
    `listed` (disk.identity)."""
    held: dict[str, io.FileIO] = _threads.__dict__.setdefault("held", {})
    file = held.pop(path, None)
    if file is not None and disk.identity(os.fstat(file.fileno())) != listed:
        file.close()
        file = None
    if file is None:
        descriptor, status = disk.open_regular(path)
        file = io.FileIO(descriptor)
        if disk.identity(status) != listed:
            file.close()
            return None
    held[path] = file  # the most recently read, last
    if len(held) > HELD:
        held.pop(next(iter(held))).close()
    return os.pread(file.fileno(), end - start, start)
