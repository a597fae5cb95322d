"""The live progress bar and the closing summary table of a local run."""

import contextlib
import sys
import tempfile
import threading
import time
from collections import deque

from pipeline.dataset.metadata import DatasetInfo
from transforms.progress import read_progress

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


def render_end(done: int, total: int | None, elapsed: float, finished: bool) -> str:
    """The bar's last line: `... done in 0:26  (192.3 img/s)`, or where a failed or
    interrupted run stopped."""
    if not finished:
        return f"{_counts(done, total)}  stopped after {clock(elapsed)}"
    average = f"  ({done / elapsed:,.1f} img/s)" if elapsed > 0 else ""
    return f"{_counts(done, total)}  done in {clock(elapsed)}{average}"


def progress_folder(stack: contextlib.ExitStack) -> str:
    """A folder where the shard writers leave their counts for the bar; removed with `stack`."""
    return stack.enter_context(tempfile.TemporaryDirectory(prefix="tfrp-"))


class ProgressBar:
    """Context manager: redraws the bar on stderr from the counts the shard writers leave.

    A run that ends in an error or Ctrl-C ends the bar's line (saying where it stopped) if it
    showed one, so the message that follows starts a line of its own.
    """

    def __init__(self, folder: str, stream=None):
        self._folder = folder
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._start = time.monotonic()
        self._rate = RecentRate()
        self._shown = False

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, error_type, *_):
        self._stop.set()
        self._thread.join()
        if error_type is None or self._shown:
            done, total = read_progress(self._folder)
            elapsed = time.monotonic() - self._start
            self._write(render_end(done, total, elapsed, error_type is None), end="\n")

    def _loop(self):
        last_line = time.monotonic()
        while not self._stop.wait(_POLL_S):
            done, total = read_progress(self._folder)
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


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def format_summary(info: DatasetInfo, folder: str) -> str:
    """The table printed at the end of a run: per split examples, shards, bytes and errors."""
    rows = [("split", "examples", "shards", "size", "errors")]
    for name, split in sorted(info.splits.items()):
        rows.append(
            (
                name,
                f"{split.examples:,}",
                str(len(split.shards)),
                _mb(split.bytes),
                f"{split.errors:,}",
            )
        )
    unsplit = info.errors - sum(s.errors for s in info.splits.values())
    total_bytes = sum(s.bytes for s in info.splits.values())
    shard_total = sum(len(s.shards) for s in info.splits.values())
    rows.append(
        ("total", f"{info.records:,}", str(shard_total), _mb(total_bytes), f"{info.errors:,}")
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    if unsplit:
        lines.append(f"rows with no split (unparsed lines, unlisted folders): {unsplit:,}")
    if info.errors:
        reasons = ", ".join(f"{r}: {n:,}" for r, n in info.errors_by_reason.items())
        lines.append(f"rejected rows by reason: {reasons}  (errors/*.jsonl)")
    if info.skipped_files:
        lines.append(f"{info.skipped_files:,} non-image files or deeper folders skipped in trees")
    if info.boxes_dropped:
        by_split = ", ".join(
            f"{name} {split.boxes_dropped:,}"
            for name, split in sorted(info.splits.items())
            if split.boxes_dropped
        )
        lines.append(f"boxes dropped, no area inside their image: {by_split}")
    if info.negatives_dropped:
        left_out = info.negatives_dropped
        lines.append(f"{left_out:,} images without objects left out (--drop_negatives)")
    state = "published" if not info.failures else "NOT published"
    lines.append(f"version: {folder}  ({state})")
    return "\n".join(lines)


def format_counters(counters: dict[str, int]) -> str:
    """The job's own counters (from Beam metrics), as printed after a remote run."""
    errors = {k.removeprefix("error_"): v for k, v in counters.items() if k.startswith("error_")}
    line = (
        f"rows read: {counters.get('rows', 0):,}  images ok: {counters.get('records', 0):,}  "
        f"bytes written: {counters.get('bytes', 0):,}  errors: {sum(errors.values()):,}"
    )
    if errors:
        line += " (" + ", ".join(f"{k} {v:,}" for k, v in sorted(errors.items())) + ")"
    return line
