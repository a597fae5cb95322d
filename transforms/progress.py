"""A conversion's progress: the observer a runner attaches, the counts its stages report to it,
and the bar a person watches.

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
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass

_FLUSH_S = 0.25  # a shard's count is rewritten at most this often
_TOTAL = "_total"
_POLL_S = 0.5
_QUIET_LOG_S = 15  # without a terminal, a plain line this often instead of a redrawn bar
# The rate, and the ETA from it, follow the last RATE_WINDOW_S of work: the rate since the
# start would carry the manifest reading and the writers' start-up for the whole run. The
# writers' first WARM_UP_S (children starting, first files opened, a cold page cache) are left
# out, and neither is shown before MIN_SPAN_S of work after them.
RATE_WINDOW_S = 20.0
WARM_UP_S = 5.0
MIN_SPAN_S = 5.0


class ShardCount:
    """The rows one shard writer has converted (error rows included); this one tells no one."""

    def add(self, rows: int) -> None:
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
        self._count = 0
        self._last = 0.0

    def add(self, rows: int) -> None:
        self._count += rows
        if time.monotonic() - self._last > _FLUSH_S:
            self.flush()

    def flush(self) -> None:
        self._last = time.monotonic()
        _write_count(self._folder, self._name, self._count)


@dataclass(frozen=True)
class FolderProgress(Progress):
    """Counts left as a file per shard, and one for the total, in `folder` on this machine;
    only the folder's name is pickled to a worker."""

    folder: str

    def planned(self, rows: int) -> None:
        _write_count(self.folder, _TOTAL, rows)

    def shard(self, name: str) -> ShardCount:
        return _FileCount(self.folder, name)

    def counts(self) -> tuple[int, int | None]:
        """(rows done, total rows or None while the manifests are still being read)."""
        done, total = 0, None
        for name in os.listdir(self.folder):
            if name.startswith("."):
                continue
            try:
                with open(os.path.join(self.folder, name)) as handle:
                    value = int(handle.read())
            except (OSError, ValueError):
                continue
            if name == _TOTAL:
                total = value
            else:
                done += value
        return done, total


def clock(seconds: float) -> str:
    """`M:SS`, or `H:MM:SS` from an hour on."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class RecentRate:
    """Images a second over the last RATE_WINDOW_S, fed `(time, done)` samples as they come."""

    def __init__(self):
        self._samples: deque[tuple[float, int]] = deque()
        self._work_began: float | None = None

    def add(self, now: float, done: int) -> None:
        if not done:  # manifests still read, writers still starting: no work to time yet
            return
        if self._work_began is None:
            self._work_began = now
        if now - self._work_began < WARM_UP_S:
            return
        self._samples.append((now, done))
        while self._samples[0][0] < now - RATE_WINDOW_S:
            self._samples.popleft()

    def rate(self) -> float | None:
        """None until the samples span MIN_SPAN_S."""
        if not self._samples or self._samples[-1][0] - self._samples[0][0] < MIN_SPAN_S:
            return None
        (first, first_done), (last, last_done) = self._samples[0], self._samples[-1]
        return (last_done - first_done) / (last - first)


def _counts(done: int, total: int | None, width: int = 30) -> str:
    if total is None:
        return "reading manifests..."
    filled = int((min(1.0, done / total) if total else 1.0) * width)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} images"


def render_bar(done: int, total: int | None, elapsed: float, rate: float | None) -> str:
    """`[#####.....] 1,234/5,000 images  0:14  312.0 img/s  ETA 0:12` (no rate or ETA while
    `rate` is None, no ETA while nothing moves)."""
    line = f"{_counts(done, total)}  {clock(elapsed)}"
    if rate is None or total is None:
        return line
    line += f"  {rate:,.1f} img/s"
    return line + (f"  ETA {clock((total - done) / rate)}" if rate > 0 and done < total else "")


def render_end(done: int, total: int | None, elapsed: float, finished: bool) -> str:
    """The bar's last line: `... done in 0:26  (192.3 img/s)`, or where a failed or
    interrupted run stopped."""
    if not finished:
        return f"{_counts(done, total)}  stopped after {clock(elapsed)}"
    average = f"  ({done / elapsed:,.1f} img/s)" if elapsed > 0 else ""
    return f"{_counts(done, total)}  done in {clock(elapsed)}{average}"


class ProgressBar:
    """Context manager, entered by a runner once its work starts: returns the FolderProgress
    its stages report to (in a temporary folder), and redraws the bar on `stream` (stderr)
    from it, in place on a terminal, otherwise as a plain line every _QUIET_LOG_S.

    A run that ends in an error or Ctrl-C ends the bar's line (saying where it stopped) if it
    showed one, so the message that follows starts a line of its own.
    """

    def __init__(self, stream=None):
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._rate = RecentRate()
        self._shown = False

    def __enter__(self) -> FolderProgress:
        self._progress = FolderProgress(tempfile.mkdtemp(prefix="tfrp-"))
        self._start = time.monotonic()
        self._thread.start()
        return self._progress

    def __exit__(self, error_type, *_):
        self._stop.set()
        self._thread.join()
        try:
            if error_type is None or self._shown:
                done, total = self._progress.counts()
                elapsed = time.monotonic() - self._start
                self._write(render_end(done, total, elapsed, error_type is None), end="\n")
        finally:
            shutil.rmtree(self._progress.folder, ignore_errors=True)

    def _loop(self):
        last_line = time.monotonic()
        while not self._stop.wait(_POLL_S):
            done, total = self._progress.counts()
            now = time.monotonic()
            self._rate.add(now, done)
            if self._tty or now - last_line > _QUIET_LOG_S:
                last_line = now
                line = render_bar(done, total, now - self._start, self._rate.rate())
                self._write(line, end="" if self._tty else "\n")

    def _write(self, line: str, end: str):
        self._stream.write(("\r\033[K" if self._tty else "") + line + end)
        self._stream.flush()
        self._shown = True
