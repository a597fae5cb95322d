"""A conversion's progress: the observer a runner attaches and the counts its stages report to
it (the bar a person watches draws them: transforms/progress_bar.py).

The stages tell a `Progress` the rows the plan covers, once it is made, and the rows each shard
writer has converted, as it goes; pure functions tell it nothing. `Progress` itself tells no
one (--no_progress, a remote runner, a test pipeline); `ProgressBar` hands the stages a
`FolderProgress` and draws what it collects.

Counts travel as files in a folder because it is the one channel that a local pool's worker
process, a DirectRunner thread and an SDK harness process a Beam runner started on its own all
share with the launcher (Beam's metrics reach it only when a bundle, here a whole shard, ends).
"""

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

_FLUSH_S = 0.25  # a shard's count is rewritten at most this often
_TOTAL = "_total"
_BEGAN = "_began"  # made when the first shard writer began: where conversion time starts
_CARRIED = "carried-"  # the count of records a refresh carried, not converted
_REJECTED = "rejected-"  # of a shard's rows counted done, those that became error rows


class ShardCount:
    """The rows one shard writer has done, and of them those it rejected (error rows); this
    one tells no one."""

    def add(self, rows: int, rejected: int = 0) -> None:
        pass

    def flush(self) -> None:
        """Make the count so far seen: at the end of the shard."""


class Progress:
    """What a run's stages report; this observer tells no one."""

    def planned(self, rows: int) -> None:
        """The plan covers `rows` rows: the total the bar counts to."""

    def shard(self, name: str) -> ShardCount:
        """A count for one shard, or piece of one, being written, named uniquely in the run: a
        retried attempt counts under its name again, replacing the count, not adding to it."""
        return ShardCount()

    def carried(self, name: str, rows: int) -> None:
        """A shard done at once: `rows` records carried from the published version."""
        count = self.shard(name)
        count.add(rows)
        count.flush()


SILENT = Progress()
# What a runner enters once its work starts, attaching the observer its stages report to.
Watch = contextlib.AbstractContextManager[Progress]
UNWATCHED: Watch = contextlib.nullcontext(SILENT)


def _write_count(folder: str, name: str, count: int) -> None:
    temp = os.path.join(folder, f".{name}.{os.getpid()}.{threading.get_ident()}")
    with open(temp, "w") as handle:
        handle.write(str(count))
    os.replace(temp, os.path.join(folder, name))  # the reader never sees a half-written number


class _FileCount(ShardCount):
    def __init__(self, folder: str, name: str):
        self._folder, self._name = folder, name
        self._count = self._rejected = 0
        self._last = 0.0

    def add(self, rows: int, rejected: int = 0) -> None:
        self._count += rows
        self._rejected += rejected
        if time.monotonic() - self._last > _FLUSH_S:
            self.flush()

    def flush(self) -> None:
        self._last = time.monotonic()
        if self._rejected:  # first: a row counted done is never missing from the rejected
            _write_count(self._folder, _REJECTED + self._name, self._rejected)
        _write_count(self._folder, self._name, self._count)


class Converted(NamedTuple):
    """The rows shard writers converted into records and those they rejected (records carried
    from a published version are neither), and the seconds from the first one's start to the
    last's end."""

    rows: int
    seconds: float
    rejected: int = 0


@dataclass(frozen=True)
class FolderProgress(Progress):
    """Counts left as a file per shard, and one for the total, in `folder` on this machine,
    and a file made as the first shard writer began; only the folder's name is pickled to a
    worker."""

    folder: str

    def planned(self, rows: int) -> None:
        _write_count(self.folder, _TOTAL, rows)

    def shard(self, name: str) -> ShardCount:
        _mark_began(self.folder)
        return _FileCount(self.folder, name)

    def carried(self, name: str, rows: int) -> None:
        _write_count(self.folder, _CARRIED + name, rows)

    def counts(self) -> tuple[int, int | None]:
        """(rows done, total rows or None while the manifests are still being read)."""
        counts = self._counts()
        total = counts.pop(_TOTAL, None)
        return sum(n for name, n in counts.items() if not name.startswith(_REJECTED)), total

    def converted(self) -> Converted | None:
        """The rows the shard writers converted, over the time from the first one's start to
        the last count any left (each leaves its last as its shard ends): the files' times,
        as writers may be other processes. None before the first began."""
        try:
            began = os.stat(os.path.join(self.folder, _BEGAN)).st_mtime
        except OSError:
            return None
        counts = self._counts()
        counts.pop(_TOTAL, None)
        written = [name for name in counts if not name.startswith((_CARRIED, _REJECTED))]
        rejected = sum(n for name, n in counts.items() if name.startswith(_REJECTED))
        times = (os.stat(os.path.join(self.folder, name)).st_mtime for name in written)
        done = sum(counts[name] for name in written)
        return Converted(done - rejected, max(times, default=began) - began, rejected)

    def _counts(self) -> dict[str, int]:
        counts = {}
        for name in os.listdir(self.folder):
            if name.startswith(".") or name == _BEGAN:
                continue
            try:
                with open(os.path.join(self.folder, name)) as handle:
                    counts[name] = int(handle.read())
            except (OSError, ValueError):
                continue
        return counts


def _mark_began(folder: str) -> None:
    """Leave a file made when the first shard writer began; a later writer's exclusive create
    fails, and leaves it."""
    with contextlib.suppress(FileExistsError), open(os.path.join(folder, _BEGAN), "x"):
        pass
