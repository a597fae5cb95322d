"""Error rows streamed to the errors files as they arise, in bounded memory: the local runner's
side of transforms/beam/error_files.py, writing the same bytes.

An errors file is sorted, and which file a row goes to depends on how many rows there are in
all (transforms/write/error_files.py): no file can be written before the last row is known. So,
as an external sort does, rows are buffered as their JSON lines up to RUN_BYTES, sorted and
spilled into the run's staging folder as a run (an errors file's format); at the end the runs
are merged and the merged stream is routed to the files, each file's rows being a sorted part
of it. Counts are tallied as the rows pass. Memory holds one buffer, a read buffer per run and
a write buffer per file open at once, however many rows are rejected; a killed run leaves its
runs in its staging folder, which is never published.
"""

import heapq
import io
import json
import posixpath
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import google_crc32c

from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.tfrecord.records import file_crc32c
from tfrecord_pipeline.transforms.write.error_files import (
    ErrorCounts,
    ErrorFileResult,
    SortKey,
    counted_as,
    error_file_count,
    error_file_name,
    file_of_key,
)

RUN_BYTES = 8 << 20  # JSON lines buffered before they are spilled as a run (~20 MB resident)
RUNS_AT_ONCE = 64  # runs merged at once: as many more make one run of the next level
FILES_AT_ONCE = 64  # files written at once: more are first routed in groups, a run each
# An object's writer holds what it is given up to 16 MB (Beam's GcsIO upload chunk) before it
# uploads: few at once when staging is on gs://.
REMOTE_FILES_AT_ONCE = 4
READ_BYTES = 64 << 10  # read buffer of a run being merged
WRITE_BYTES = 64 << 10  # lines batched per write, so a file's write buffer stays this small
_RUN = "errors-run"  # a spilled run's staged name: this, then a random suffix
RUN_PREFIX = f"{_RUN}."

Line = tuple[SortKey, str]  # an error row's sort key and its JSON line: how it sorts in a file


class SpilledErrors(NamedTuple):
    """A shard-writer process's error rows, for its parent's sink: the runs it spilled into
    staging, the rest as lines (under RUN_BYTES), and the counts of all of them (`counted_as`
    → rows)."""

    runs: tuple[str, ...]
    lines: tuple[Line, ...]
    tally: Counter


class ErrorSink:
    """Takes error rows as they arise and writes them as errors files into `staging` at the
    end (`finish`): the same files as `write_error_file` makes of every row at once."""

    def __init__(self, staging: str):
        self._staging = staging
        self._empty()

    def _empty(self) -> None:
        self._lines: list[Line] = []
        self._bytes = 0
        self._tally: Counter = Counter()
        self._levels: list[list[str]] = [[]]  # runs; a level-n run merges RUNS_AT_ONCE of n-1

    def add(self, error: ErrorRow) -> None:
        self._tally[counted_as(error)] += 1
        self._buffer([(error.sort_key(), error.to_json())])

    def adopt(self, spilled: SpilledErrors) -> None:
        """Take a shard-writer process's error rows."""
        self._tally.update(spilled.tally)
        for run in spilled.runs:
            self._add_run(run)
        self._buffer(spilled.lines)

    def passed(self, items: Iterable) -> Iterator:
        """`items` but their error rows (and spilled error rows), which this sink takes."""
        for item in items:
            if isinstance(item, ErrorRow):
                self.add(item)
            elif isinstance(item, SpilledErrors):
                self.adopt(item)
            else:
                yield item

    def spilled(self) -> SpilledErrors:
        """Every row taken so far, for another process's sink to adopt; this one is emptied."""
        spilled = SpilledErrors(
            tuple(run for level in self._levels for run in level),
            tuple(self._lines),
            self._tally,
        )
        self._empty()
        return spilled

    def finish(self, rows_per_file: int) -> tuple[list[ErrorFileResult], ErrorCounts]:
        """Write the errors files (about `rows_per_file` rows each) and delete the runs."""
        counts = ErrorCounts.of(self._tally)
        count = error_file_count(counts.total, rows_per_file)
        runs = [self._path(run) for level in self._levels for run in level]
        files = self._route(self._merged(runs, sorted(self._lines)), count, range(count))
        fileio.delete(runs)
        return files, counts

    def _buffer(self, lines: Iterable[Line]) -> None:
        for line in lines:
            self._lines.append(line)
            self._bytes += len(line[1])
        if self._bytes >= RUN_BYTES:
            self._add_run(self._write_run(sorted(self._lines)))
            self._lines, self._bytes = [], 0

    def _add_run(self, run: str) -> None:
        """A run joins level 0; a full level is merged into one run of the next."""
        self._levels[0].append(run)
        for level, runs in enumerate(self._levels):
            if len(runs) < RUNS_AT_ONCE:
                break
            paths = [self._path(run) for run in runs]
            merged = self._write_run(self._merged(paths))
            fileio.delete(paths)
            runs.clear()
            if level + 1 == len(self._levels):
                self._levels.append([])
            self._levels[level + 1].append(merged)

    def _path(self, name: str) -> str:
        return fileio.join(self._staging, name)

    def _write_run(self, lines: Iterable[Line]) -> str:
        name = _run_name()
        with _LineWriter(self._path(name)) as writer:
            writer.write_all(lines)
        return name

    @staticmethod
    def _merged(runs: list[str], lines: Iterable[Line] = ()) -> Iterator[Line]:
        return heapq.merge(lines, *map(_run_lines, runs))

    def _route(self, lines: Iterator[Line], count: int, files: range) -> list[ErrorFileResult]:
        """Files `files` of `count` from sorted `lines` (theirs only): written at once, or, when
        they are more than can be, routed first to a run per group of files."""
        at_once = REMOTE_FILES_AT_ONCE if fileio.is_remote(self._staging) else FILES_AT_ONCE
        if len(files) <= at_once:
            return self._write_files(lines, count, files)
        size = -(-len(files) // at_once)
        groups = [files[start : start + size] for start in range(0, len(files), size)]
        writers = [_LineWriter(self._path(_run_name())) for _ in groups]
        for line in lines:
            writers[(file_of_key(line[0], count) - files.start) // size].write(line)
        results = []
        for group, writer in zip(groups, writers, strict=True):
            writer.close()
            results += self._route(_run_lines(writer.path), count, group)
            fileio.delete([writer.path])
        return results

    def _write_files(
        self, lines: Iterator[Line], count: int, files: range
    ) -> list[ErrorFileResult]:
        names = [error_file_name(index, count) for index in files]
        staged = [fileio.staged_name(posixpath.basename(name)) for name in names]
        writers = [_LineWriter(self._path(name)) for name in staged]
        for line in lines:
            writers[file_of_key(line[0], count) - files.start].write(line)
        for writer in writers:
            writer.close()
            fileio.sync_file(writer.path)  # on disk before any marker can promise it
        return [
            ErrorFileResult(name, stage, writer.rows, writer.size, writer.crc32c)
            for name, stage, writer in zip(names, staged, writers, strict=True)
        ]


def _run_name() -> str:
    """A new run's name in staging: random, as a staged shard's."""
    return fileio.staged_name(_RUN)


def _run_lines(path: str) -> Iterator[Line]:
    """A run's lines with their sort keys, read back in order."""
    with io.BufferedReader(fileio.open_bytes(path, READ_BYTES), READ_BYTES) as stream:
        for data in stream:
            line = data[:-1].decode()
            row = json.loads(line)
            yield (row["source"], row["key"], row["reason"]), line


class _LineWriter:
    """Writes lines to a new file in batches of WRITE_BYTES, counting them, and the file's
    size and CRC-32C."""

    def __init__(self, path: str):
        self.path = path
        self.rows = self.size = 0
        self._handle = fileio.create(path)
        self._batch: list[bytes] = []
        self._bytes = self._crc = 0

    def write(self, line: Line) -> None:
        data = f"{line[1]}\n".encode()
        self._batch.append(data)
        self._bytes += len(data)
        self.rows += 1
        if self._bytes >= WRITE_BYTES:
            self._flush()

    def write_all(self, lines: Iterable[Line]) -> None:
        for line in lines:
            self.write(line)

    def _flush(self) -> None:
        data = b"".join(self._batch)
        self._handle.write(data)
        self._handle.flush()  # the handle's own buffer is used no further than one batch
        self._crc, self.size = google_crc32c.extend(self._crc, data), self.size + len(data)
        self._batch, self._bytes = [], 0

    @property
    def crc32c(self) -> str:
        return file_crc32c(self._crc)

    def close(self) -> None:
        self._flush()
        self._handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
