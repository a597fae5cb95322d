"""Rejected rows as files: which errors file a row goes to, each file's bytes, and the counts
the commit step is given in place of the rows.

Error rows can be many (a tenth of a web-scraped manifest), so no step holds them all: each goes
to one of `error_file_count` files by a hash of what identifies it, each file is sorted and
written into the run's staging folder under a name no other attempt uses (on Beam by a worker a
file; on the local runner by a sink that spills sorted runs and merges them:
transforms/local/error_sink.py), and the commit step moves the files whose results it received
into the version, as it moves shards. Counts per split and reason are combined into one small
`ErrorCounts`. All of it is a pure function of the rows, so every runner writes the same bytes.
"""

import math
import posixpath
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.keys import key_hash
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.tfrecord.records import crc32c_of

ERRORS_DIR = "errors"
ERRORS_SALT = "errors"
# Rows an errors file holds, about (rows are spread by hash): what one worker sorts in memory
# (~2 KB a row as Python objects, so ~40 MB), and a file small enough to open and read.
ROWS_PER_ERRORS_FILE = 20_000
MAX_ERROR_FILES = 99999  # five digits in the name

SortKey = tuple[str, str, str]  # an error row's source, key and reason: ErrorRow.sort_key()


class ErrorCounts(NamedTuple):
    """Rejected rows per split and reason, and per file they are a part of: all the commit
    step and the metadata need of them, bounded by splits x reasons and by the manifests
    however many rows were rejected."""

    counts: tuple[tuple[str, str, int], ...] = ()  # (split, reason, rows), sorted; "" no split
    # (file, rows) of the rows whose source names a part of a file (`archive.tar#member`,
    # `file.parquet#row`), sorted: which archives gave error rows (transforms/plan/carried.py).
    files: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, tally: Counter) -> "ErrorCounts":
        """From a Counter of `counted_as` → rows (what the Beam combiner accumulates)."""
        counts, files = Counter(), Counter()
        for (split, reason, file), n in tally.items():
            counts[split, reason] += n
            if file:
                files[file] += n
        return cls(
            tuple((split, reason, n) for (split, reason), n in sorted(counts.items())),
            tuple(sorted(files.items())),
        )

    @property
    def total(self) -> int:
        return sum(n for _, _, n in self.counts)

    def by_reason(self) -> dict[str, int]:
        return _summed((reason, n) for _, reason, n in self.counts)

    def by_split(self) -> dict[str, int]:
        return _summed((split, n) for split, _, n in self.counts)


def _summed(pairs: Iterable[tuple[str, int]]) -> dict[str, int]:
    sums: Counter = Counter()
    for name, n in pairs:
        sums[name] += n
    return dict(sorted(sums.items()))


def counted_as(error: ErrorRow) -> tuple[str, str, str]:
    """What an error row is counted under: its split, its reason, and the file its source is
    a part of (an archive's, a Parquet file's), if it is one."""
    file, mark, _ = error.source.partition("#")
    return error.split, error.reason.value, file if mark else ""


class ErrorFileResult(NamedTuple):
    """One errors file as a worker staged it: what the commit moves and the metadata lists."""

    file: str  # name in the version, errors/errors-NNNNN-of-NNNNN.jsonl
    staged: str  # this attempt's file in the staging folder
    rows: int
    bytes: int
    crc32c: str  # of the file, as a shard's: a rollback and verify check it as they check one


def error_file_count(total: int, rows_per_file: int) -> int:
    """How many files `total` error rows are written as: at least one, so `errors/` always
    holds a file to read, even an empty one."""
    return max(1, min(MAX_ERROR_FILES, math.ceil(total / rows_per_file)))


def error_file_name(index: int, count: int) -> str:
    return f"{ERRORS_DIR}/errors-{index:05d}-of-{count:05d}.jsonl"


def file_of(error: ErrorRow, count: int) -> int:
    """The file an error row goes to: a hash of its source, key and reason (its source names
    its manifest line, so rows spread evenly even when many share a key)."""
    return file_of_key(error.sort_key(), count)


def file_of_key(sort_key: SortKey, count: int) -> int:
    """`file_of` a row given by its sort key (a spilled row is a JSON line and its key)."""
    if count == 1:
        return 0
    source, key, reason = sort_key
    return key_hash(f"{source}\n{key}\n{reason}", ERRORS_SALT) % count


def error_file_bytes(errors: Iterable[ErrorRow]) -> bytes:
    """An errors file: a JSON line per row, sorted by source, key and reason with the whole
    line breaking ties, so the bytes never depend on the order the rows arrived in."""
    lines = sorted((error.sort_key(), error.to_json()) for error in errors)
    return "".join(f"{line}\n" for _, line in lines).encode()


def write_error_file(
    staging: str, index: int, count: int, errors: Iterable[ErrorRow]
) -> ErrorFileResult:
    """Write errors file `index` of `count` into `staging`, on disk before it returns, under
    a name of its own: a retried or duplicate attempt writes beside it."""
    errors = list(errors)
    name = error_file_name(index, count)
    staged = fileio.staged_name(posixpath.basename(name))
    data = error_file_bytes(errors)
    fileio.write_synced(fileio.join(staging, staged), data)
    return ErrorFileResult(name, staged, len(errors), len(data), crc32c_of(data))
