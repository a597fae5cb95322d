"""The live progress bar and the closing summary table of a local run."""

import contextlib
import sys
import tempfile
import threading
import time

from pipeline.metadata import DatasetInfo
from transforms.progress import read_progress

_POLL_S = 0.5
_QUIET_LOG_S = 15  # without a terminal, a plain line this often instead of a redrawn bar


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def render_bar(done: int, total: int | None, elapsed: float, width: int = 30) -> str:
    """`[#####.....] 1,234/5,000 images  312.0 img/s  ETA 0:00:12`."""
    rate = done / elapsed if elapsed > 0 else 0.0
    if total is None:
        return f"reading manifests... {_duration(elapsed)}"
    fraction = min(1.0, done / total) if total else 1.0
    filled = int(fraction * width)
    eta = _duration((total - done) / rate) if rate > 0 and done < total else "-"
    return (
        f"[{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} images  "
        f"{rate:,.1f} img/s  ETA {eta}"
    )


def progress_folder(stack: contextlib.ExitStack) -> str:
    """A folder where the shard writers leave their counts for the bar; removed with `stack`."""
    return stack.enter_context(tempfile.TemporaryDirectory(prefix="tfrp-"))


class ProgressBar:
    """Context manager: redraws the bar on stderr from the counts the shard writers leave."""

    def __init__(self, folder: str, stream=None):
        self._folder = folder
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._start = time.monotonic()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, error_type, *_):
        self._stop.set()
        self._thread.join()
        if error_type is None:  # on failure the error is the last word, not a stale bar
            self._draw(final=True)

    def _loop(self):
        last_line = time.monotonic()
        while not self._stop.wait(_POLL_S):
            if self._tty or time.monotonic() - last_line > _QUIET_LOG_S:
                last_line = time.monotonic()
                self._draw(final=False)

    def _draw(self, final: bool):
        done, total = read_progress(self._folder)
        line = render_bar(done, total, time.monotonic() - self._start)
        end = "\n" if final or not self._tty else ""
        self._stream.write(("\r\033[K" if self._tty else "") + line + end)
        self._stream.flush()


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def format_summary(info: DatasetInfo, output: str) -> str:
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
        lines.append(f"rejected rows by reason: {reasons}  (errors/errors.jsonl)")
    if info.skipped_files:
        lines.append(f"{info.skipped_files:,} non-image files or deeper folders skipped in trees")
    state = "committed" if not info.failures else "NOT committed"
    lines.append(f"output: {output}  ({state})")
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
