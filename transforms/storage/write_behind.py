"""New local files written behind: the disk starts writing a file's bytes as they come,
WRITE_BEHIND_BYTES at a time, while its writer goes on.

A file flushed at its end (fsync) then waits for its last few MB, not for all of it: under
strace, a 20,000-image run's 75 MB shards took 43-48 ms each to flush, under 7 ms written
behind (the disk here writes 360 MB/s; the last shards' flushes held the run's end). Linux
starts the writeback of a range it has not yet written when told POSIX_FADV_DONTNEED of it,
and returns (PostgreSQL's pg_flush_data asks so where there is no sync_file_range); pages
still dirty stay cached. Elsewhere the advice changes nothing, or there is none to give.
"""

import contextlib
import io
import os

WRITE_BEHIND_BYTES = 8 << 20  # bytes a new file holds in the page cache before they are written


class _WrittenBehind(io.FileIO):
    """A new file that asks for the writeback of every WRITE_BEHIND_BYTES written to it."""

    _behind = 0  # bytes up to which the writeback was asked for
    _written = 0

    def write(self, data) -> int:
        written = super().write(data)
        self._written += written or 0
        if self._written - self._behind >= WRITE_BEHIND_BYTES:
            with contextlib.suppress(OSError):  # advice: a file system may refuse it
                os.posix_fadvise(
                    self.fileno(),
                    self._behind,
                    self._written - self._behind,
                    os.POSIX_FADV_DONTNEED,
                )
            self._behind = self._written
        return written


def open_new(path: str, buffer_bytes: int):
    """A buffered binary write handle on a new (or emptied) file at `path`."""
    if not hasattr(os, "posix_fadvise"):
        return open(path, "wb", buffering=buffer_bytes)
    return io.BufferedWriter(_WrittenBehind(path, "wb"), buffer_bytes)
