"""The bar a person watches while a conversion runs on this machine: drawn from the counts the
stages leave in a `FolderProgress` (transforms/progress.py), with a recent rate and an ETA, and
a last line that rates the rows converted over the time the shard writers took.
"""

import shutil
import sys
import tempfile
import threading
import time
from collections import deque

from tfrecord_pipeline.transforms.progress import Converted, FolderProgress

_POLL_S = 0.5
_QUIET_LOG_S = 15  # without a terminal, a plain line this often instead of a redrawn bar
# The rate, and the ETA from it, follow the last RATE_WINDOW_S of work: the rate since the
# start would carry the manifest reading and the writers' start-up for the whole run. The
# writers' first WARM_UP_S (children starting, first files opened, a cold page cache) are left
# out, and neither is shown before MIN_SPAN_S of work after them.
RATE_WINDOW_S = 20.0
WARM_UP_S = 5.0
MIN_SPAN_S = 5.0


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


def render_end(
    done: int, total: int | None, elapsed: float, finished: bool, converted: Converted | None
) -> str:
    """The bar's last line: `... done in 0:26  (5,000 converted at 192.3 img/s)`, or with
    rows rejected `(4,990 converted, 10 rejected, at 192.3 img/s)`: the rate of the rows done
    (a rejected one is read and checked too) over the shard writers' own time, from the first
    one's start to the last one's end (not reading the manifests, planning, starting up or
    committing, nor the records a refresh carried); no rate when no row was done. Or where a
    failed or interrupted run stopped."""
    if not finished:
        return f"{_counts(done, total)}  stopped after {clock(elapsed)}"
    line = f"{_counts(done, total)}  done in {clock(elapsed)}"
    if not converted or not converted.rows + converted.rejected or converted.seconds <= 0:
        return line
    rate = (converted.rows + converted.rejected) / converted.seconds
    rejected = f", {converted.rejected:,} rejected," if converted.rejected else ""
    return f"{line}  ({converted.rows:,} converted{rejected} at {rate:,.1f} img/s)"


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
                converted = self._progress.converted()
                line = render_end(done, total, elapsed, error_type is None, converted)
                self._write(line, end="\n")
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
