"""Rows files: per shard, what a refresh needs of each record, in record order (its key, its
row's fingerprint and the label ids it holds). The format, its writing and its reading, in one
place: the shard writer writes one beside each shard (`rows/<shard>.rows` in the version), a
refresh reads the published version's to know its records again (transforms/plan/refresh.py).

One line a record: fingerprint, label ids (comma-separated; one for a single label) and key,
tab-separated; a key holding a line end, tab or other control character (or starting with a
quote) as a JSON string, so that any key stays one field of one line.
"""

import io
import itertools
import json
import re
from collections.abc import Iterable, Iterator
from typing import BinaryIO, NamedTuple

from tfrecord_pipeline.transforms.storage import fileio

ROWS_DIR = "rows"
ROWS_SUFFIX = ".rows"  # a staged shard's rows file is its staged name and this
READ_BYTES = 1 << 20  # a rows file is read this much at a time
WRITE_LINES = 10_000  # and written this many lines at a time
# Keys that would not stay one field of one line as they are, written as JSON strings instead.
_QUOTED = re.compile(r'^"|[\x00-\x1f\x7f-\x9f\u2028\u2029\\]')


class PastRecord(NamedTuple):
    """A record of a version, as its shard's rows file lists it (in record order)."""

    key: str
    fingerprint: str
    label_ids: tuple[int, ...]  # the distinct label ids the record holds


class DamagedRowsFileError(ValueError):
    """A rows file that cannot be read, or does not list its shard's records."""


def rows_file_name(shard_file: str) -> str:
    """The rows file's name in a version, for the shard named `shard_file`."""
    return f"{ROWS_DIR}/{shard_file}{ROWS_SUFFIX}"


def rows_line(record: PastRecord) -> str:
    key = json.dumps(record.key) if _QUOTED.search(record.key) else record.key
    ids = ",".join(map(str, record.label_ids))
    return f"{record.fingerprint}\t{ids}\t{key}\n"


def rows_in(lines: Iterable[str]) -> Iterator[PastRecord]:
    """The records of a rows file's lines (each with its line end), one at a time; ValueError
    at the first line that is not one."""
    for line in lines:
        if not line.endswith("\n"):
            raise ValueError("its last line is cut short")
        fingerprint, ids, key = line[:-1].split("\t", 2)
        if key.startswith('"'):
            key = json.loads(key)
        yield PastRecord(key, fingerprint, tuple(map(int, filter(None, ids.split(",")))))


def parse_rows(text: str) -> list[PastRecord]:
    """The records a rows file's text lists; ValueError if it is not one."""
    return list(rows_in(io.StringIO(text, newline="\n")))


def write_rows_file(staged_shard: str, records: Iterable[PastRecord], sync: bool = True) -> int:
    """The rows file of the staged shard file `staged_shard`, written as `records` come (never
    all held: a refresh passes a published shard's kept records through) and, with `sync`, on
    the disk before the shard is described to anyone; returns how many records it lists."""
    path = f"{staged_shard}{ROWS_SUFFIX}"
    records, listed = iter(records), 0
    with fileio.create(path) as handle:
        while lines := [rows_line(record) for record in itertools.islice(records, WRITE_LINES)]:
            handle.write("".join(lines).encode())
            listed += len(lines)
    if sync:
        fileio.sync_file(path)
    return listed


def read_rows_file(path: str, records: int) -> Iterator[PastRecord]:
    """The records a published rows file lists, read as they are asked for (a buffer held,
    never the file: a shard of tiny images lists hundreds of thousands). The file is opened
    here: DamagedRowsFileError now if it cannot be (a missing file included), else where the
    reading finds it is not one that lists `records` records; a store's failure is raised as
    it is."""
    try:
        stream = io.BufferedReader(fileio.open_bytes(path, READ_BYTES), READ_BYTES)
    except fileio.UNAVAILABLE:
        raise
    except fileio.READ_ERRORS as error:
        raise DamagedRowsFileError(f"{path}: {error}") from None
    return _listed(path, stream, records)


def _listed(path: str, stream: BinaryIO, records: int) -> Iterator[PastRecord]:
    with stream:
        listed = 0
        try:
            for record in rows_in(io.TextIOWrapper(stream, "utf-8-sig", newline="\n")):
                listed += 1
                yield record
        except fileio.UNAVAILABLE:
            raise
        except (*fileio.READ_ERRORS, ValueError) as error:
            raise DamagedRowsFileError(f"{path}: {error}") from None
    if listed != records:
        raise DamagedRowsFileError(f"{path} lists {listed} records, its shard {records}")
