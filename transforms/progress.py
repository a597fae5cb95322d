"""Worker side of the local progress bar: per-shard counts left in a folder the CLI polls.

Beam's metrics reach the launcher only when a bundle finishes, and a shard is one bundle, so a
bar fed by metrics would sit still for minutes. Instead each shard writer rewrites a tiny file
with its count a few times a second; the launcher sums them. Only local runs set the folder.
"""

import os
import time

_INTERVAL_S = 0.25
TOTAL = "_total"


def _write_count(folder: str, name: str, count: int) -> None:
    temp = os.path.join(folder, f".{name}.{os.getpid()}")
    with open(temp, "w") as handle:
        handle.write(str(count))
    os.replace(temp, os.path.join(folder, name))  # the reader never sees a half-written number


class ProgressReporter:
    """Counts one shard's rows and publishes the count at most every quarter second."""

    def __init__(self, folder: str | None, name: str):
        self._folder, self._name = folder, name
        self._count = 0
        self._last = 0.0

    def add(self, count: int) -> None:
        self._count += count
        if self._folder and time.monotonic() - self._last > _INTERVAL_S:
            self.flush()

    def flush(self) -> None:
        if self._folder:
            self._last = time.monotonic()
            _write_count(self._folder, self._name, self._count)


def write_total(folder: str | None, total: int) -> None:
    if folder:
        _write_count(folder, TOTAL, total)


def read_progress(folder: str) -> tuple[int, int | None]:
    """(rows done, total rows or None while the manifests are still being read)."""
    done, total = 0, None
    for name in os.listdir(folder):
        if name.startswith("."):
            continue
        try:
            with open(os.path.join(folder, name)) as handle:
                value = int(handle.read())
        except (OSError, ValueError):
            continue
        if name == TOTAL:
            total = value
        else:
            done += value
    return done, total
