"""Rows files: per shard, what a refresh needs of each record, in record order (its key, its
row's fingerprint and the label ids it holds). The format, its writing and its reading, in one
place: the shard writer writes one beside each shard (`rows/<shard>.rows` in the version), a
refresh reads the published version's to know its records again (transforms/plan/refresh.py).

One line a record: fingerprint, label ids (comma-separated; one for a single label) and key,
tab-separated; a key holding a line end, tab or other control character (or starting with a
quote) as a JSON string, so that any key stays one field of one line.
"""

import json
import re
from collections.abc import Iterable
from typing import NamedTuple

from tfrecord_pipeline.transforms.storage import fileio

ROWS_DIR = "rows"
ROWS_SUFFIX = ".rows"  # a staged shard's rows file is its staged name and this
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


def parse_rows(text: str) -> list[PastRecord]:
    """The records a rows file's text lists; ValueError if it is not one."""
    records = []
    for line in text.split("\n")[:-1]:
        fingerprint, ids, key = line.split("\t", 2)
        if key.startswith('"'):
            key = json.loads(key)
        records.append(PastRecord(key, fingerprint, tuple(map(int, filter(None, ids.split(","))))))
    return records


def write_rows_file(staged_shard: str, records: Iterable[PastRecord]) -> None:
    """The rows file of the staged shard file `staged_shard`, on the disk before the shard is
    described to anyone."""
    text = "".join(map(rows_line, records))
    fileio.write_synced(f"{staged_shard}{ROWS_SUFFIX}", text.encode())


def read_rows_file(path: str, records: int) -> list[PastRecord]:
    """The records a published rows file lists; DamagedRowsFileError unless it reads as one that
    lists `records` records (a missing file included)."""
    try:
        listed = parse_rows(fileio.read_text(path))
    except fileio.UNAVAILABLE:
        raise  # the store's failure, not the file's
    except (*fileio.READ_ERRORS, ValueError) as error:
        raise DamagedRowsFileError(f"{path}: {error}") from None
    if len(listed) != records:
        raise DamagedRowsFileError(f"{path} lists {len(listed)} records, its shard {records}")
    return listed
