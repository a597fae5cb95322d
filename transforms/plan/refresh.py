"""Refreshing a dataset: which records of the published version a new version keeps, which rows
it converts, and how its shards are named and compacted. Pure functions but for a row's
fingerprint, which stats its image (or lists its folder); pipeline/runners/refresh.py moves the
files.

A row is known again by its fingerprint: a digest of everything its record is made from (split,
label, extra features, a detection row's objects, image path) and of the image file's identity,
its size and modification time (an object's size and CRC-32C, from its folder's listing or its
metadata: transforms/storage/listings.py), taken with one stat and no read. The alternative,
a hash of a local image's bytes, would read every image every night, which is most of what a
conversion costs; the price of the stat is that a rewrite keeping both size and time goes
unseen (`touch` the file, or run without `--incremental`, to convert it again).
"""

import hashlib
import json
import re
from collections.abc import Iterable
from typing import NamedTuple

from transforms.manifest.rows import ManifestRow
from transforms.storage import fileio, gcs, listings, retry


class PastRecord(NamedTuple):
    """A record of a version, as its shard's rows file lists it (in record order)."""

    key: str
    fingerprint: str
    label_ids: tuple[int, ...]  # the distinct label ids the record holds


def fingerprint(row: ManifestRow, identity: str) -> str:
    """The fingerprint of `row` with its image file's `identity` (fileio.identity); "" (which
    matches nothing) without one. Its parts are joined by NUL, which none of them can hold
    (paths and labels with one are errors)."""
    if not identity:
        return ""
    features = repr(row.features) if row.features else ""
    if row.objects is not None:  # a detection row: its annotations make its record too
        features += repr(row.objects)
    made_of = f"{row.split}\0{row.label}\0{features}\0{row.image_uri}\0{identity}"
    return hashlib.blake2b(made_of.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def row_fingerprint(row: ManifestRow) -> str:
    """The row's fingerprint; "" (matching nothing: the row is converted, which says why the
    image cannot be had) when its image cannot be looked at. A stat the store keeps failing
    for every request is a fault (transforms/image/files.py `read_image`)."""
    try:
        return fingerprint(row, fileio.identity(row.image_uri))
    except retry.StoreUnavailableError:
        if not gcs.store_answers(row.image_uri):
            raise
        return ""
    except fileio.READ_ERRORS:
        return ""


def row_fingerprints(rows: list[ManifestRow], map_=map) -> list[str]:
    """Every row's fingerprint (`row_fingerprint`), a `gs://` image's identity taken from its
    folder's listing where that pays (transforms/storage/listings.py), else from a stat of its
    own; `map_` runs the listings and the stats (a thread pool's, where they are requests)."""
    listed = listings.listed_identities((row.image_uri for row in rows), map_)
    by_stat = iter(map_(row_fingerprint, [row for row in rows if row.image_uri not in listed]))
    return [
        fingerprint(row, listed[row.image_uri]) if row.image_uri in listed else next(by_stat)
        for row in rows
    ]


# Keys that would not stay one field of one line as they are, written as JSON strings instead.
_QUOTED = re.compile(r'^"|[\x00-\x1f\x7f-\x9f\u2028\u2029\\]')


def rows_line(record: PastRecord) -> str:
    """One line of a rows file: fingerprint, label ids (comma-separated; one for a single
    label) and key, tab-separated; a key holding a line end, tab or other control character
    (or starting with a quote) as a JSON string."""
    key = json.dumps(record.key) if _QUOTED.search(record.key) else record.key
    ids = ",".join(map(str, record.label_ids))
    return f"{record.fingerprint}\t{ids}\t{key}\n"


def read_rows(text: str) -> list[PastRecord]:
    records = []
    for line in text.split("\n")[:-1]:
        fingerprint, ids, key = line.split("\t", 2)
        if key.startswith('"'):
            key = json.loads(key)
        records.append(PastRecord(key, fingerprint, tuple(map(int, filter(None, ids.split(","))))))
    return records


def stays(row_fingerprints: list[str], past: str) -> bool:
    """Whether a past record stays: exactly one row has its key, with the record's fingerprint
    (a repeated key converts every row of it again, as a full conversion would judge them)."""
    return len(row_fingerprints) == 1 and bool(past) and row_fingerprints[0] == past


class Reuse(NamedTuple):
    """A shard of the published version that the new version keeps records of."""

    split: str
    file: str  # its name in the published version
    keep: tuple[bool, ...] | None  # per record; None: every record (the file is carried whole)
    records: tuple[PastRecord, ...]

    def kept(self) -> list[PastRecord]:
        if self.keep is None:
            return list(self.records)
        return [record for record, keep in zip(self.records, self.keep, strict=True) if keep]


class RefreshPlan(NamedTuple):
    reused: list[Reuse]
    to_convert: list[ManifestRow]  # new keys, changed rows, and every row of a repeated key


def classify(
    rows: list[ManifestRow],
    fingerprints: list[str],
    past: Iterable[tuple[str, str, list[PastRecord]]],
) -> RefreshPlan:
    """Which past records stay and which rows are converted. `past`: (split, file, records) of
    every shard of the published version. A past record stays when exactly one row has its key
    and that row's fingerprint is the record's; every other row is converted, and a past record
    whose key is gone from the manifest is dropped."""
    current: dict[str, str] = {}  # key → its row's fingerprint; "" (matching nothing) if repeated
    for row, fingerprint in zip(rows, fingerprints, strict=True):
        current[row.key] = "" if row.key in current else fingerprint
    reused, kept_keys = [], set()
    for split, file, records in past:
        keep = tuple(
            bool(record.fingerprint) and current.get(record.key) == record.fingerprint
            for record in records
        )
        if any(keep):
            kept_keys.update(record.key for record, kept in zip(records, keep, strict=True) if kept)
            reused.append(Reuse(split, file, None if all(keep) else keep, tuple(records)))
    return RefreshPlan(reused, [row for row in rows if row.key not in kept_keys])


def delta_shards(rows: int, past_records: int, past_shards: int) -> int:
    """Shards for a split's converted rows: about as full as its past shards, at least one."""
    if not rows:
        return 0
    per_shard = past_records / past_shards if past_shards and past_records else rows
    return max(1, round(rows / per_shard))


def compaction_groups(records: list[int]) -> list[list[int]]:
    """Which of a split's shards (by their record counts, in order) to concatenate: once the
    small ones (under half the largest) hold half a full shard together, they are packed, in
    order, into shards no fuller than the largest. Returns groups of two or more indexes."""
    if not records:
        return []
    full = max(records)
    small = [index for index, count in enumerate(records) if count < full / 2]
    if len(small) < 2 or sum(records[index] for index in small) < full / 2:
        return []
    groups, current, filled = [], [], 0
    for index in small:
        if current and filled + records[index] > full:
            groups.append(current)
            current, filled = [], 0
        current.append(index)
        filled += records[index]
    groups.append(current)
    return [group for group in groups if len(group) > 1]


def shifted_index(index_texts: list[str], sizes: list[int]) -> str:
    """The DALI index of files concatenated in order: each file's "offset size" lines moved by
    the bytes before it."""
    lines, base = [], 0
    for text, size in zip(index_texts, sizes, strict=True):
        for line in text.splitlines():
            offset, length = line.split()
            lines.append(f"{int(offset) + base} {length}\n")
        base += size
    return "".join(lines)
