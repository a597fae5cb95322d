"""Local image files opened a few images before they are read, their pages asked of the
kernel meanwhile: a file not in the page cache is read from the disk while the writer checks
the images before it, instead of stopping the writer for the disk's latency (or a network
file system's) on each image. A shard's images are read in record order, a hash order with no
locality on the disk, one at a time on a pass-through writer's one thread: a dataset larger
than the page cache, or a network file system, would be read at its latency, image by image.
Each file is opened once, ahead, and read from that descriptor (benchmarks/README.md: cold
and cached runs).
"""

import contextlib
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from tfrecord_pipeline.transforms.storage import disk

READ_AHEAD = 16  # images opened ahead of the one being read: a few ms of a writer's work
_ADVISE = getattr(os, "posix_fadvise", None)  # none on macOS: files are opened ahead all the same


class Opened:
    """A regular file opened ahead of its read, and its status; closed by its read, or when
    dropped unread (its row failed before its image was read, or its shard's attempt did)."""

    __slots__ = ("_descriptor", "_status")

    def __init__(self, descriptor: int, status: os.stat_result):
        self._descriptor, self._status = descriptor, status

    def read(self, path: str, max_bytes: int | None) -> tuple[bytes, str]:
        """disk.read's bytes and identity, from the file as it was opened."""
        descriptor, self._descriptor = self._descriptor, -1
        return disk.read_open(path, descriptor, self._status, max_bytes)

    def __del__(self, _close=os.close):  # bound now: at exit, the module's `os` may be gone
        if self._descriptor >= 0:
            _close(self._descriptor)


def open_ahead(path: str) -> Opened | None:
    """The regular file at `path` opened and its pages asked for (POSIX_FADV_WILLNEED starts
    their read and returns); None when it cannot be opened now: its read will tell why."""
    try:
        descriptor, status = disk.open_regular(path)
    except OSError:
        return None
    if _ADVISE is not None:
        with contextlib.suppress(OSError):  # advice: a file system may refuse it
            _ADVISE(descriptor, 0, 0, os.POSIX_FADV_WILLNEED)
    return Opened(descriptor, status)


def read_ahead(
    pairs: Iterable[tuple], local_path: Callable[[object], str | None], depth: int = READ_AHEAD
) -> Iterator[tuple]:
    """The (item, its image's bytes or None) pairs of a shard writer, in their order, each item
    whose image is a local file (`local_path`) with it Opened in place of None, `depth` pairs
    before it is given."""
    waiting: deque = deque()
    for item, data in pairs:
        path = local_path(item) if data is None else None
        waiting.append((item, open_ahead(path) if path else data))
        if len(waiting) > depth:
            yield waiting.popleft()
    yield from waiting
