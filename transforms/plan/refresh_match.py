"""A refresh's match of the rows with the published version's records by key, a bucket at a
time: every row and record of a key in one bucket (the local runner buckets them by a hash of
the key: transforms/local/row_buckets.py), so a bucket is matched alone and no step holds the
rows or keys of the whole dataset; on Beam (transforms/beam/refresh.py) one CoGroupByKey
by key makes each key a bucket of its own. What stays is decided by
`stays` (transforms/plan/refresh.py).

A shard's records are read from its rows file as they come (transforms/write/published.py
`listed_keys`), so a file found damaged midway has given some already: both runners leave them
out here (`listed`), by the files found so (`unlisted`).

The records of an archive carried unread (transforms/plan/carried.py) have no rows: each stays
as it is; a row of another manifest with such a record's key is a duplicate_key error row (the
archive's member keeps the key, as its record already does).
"""

from array import array
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import NamedTuple

from tfrecord_pipeline.transforms.archive.members import key_archive
from tfrecord_pipeline.transforms.errors import ErrorRow, Reason
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, error_row
from tfrecord_pipeline.transforms.plan.refresh import stays

Printed = tuple[ManifestRow, str]  # a row and its fingerprint (transforms/plan/fingerprints.py)


class PastKey(NamedTuple):
    """A published record as a refresh matches it: its key and its row's fingerprint, where it
    is, and whether its shard passed its check."""

    key: str
    fingerprint: str
    file: str  # its published shard
    position: int  # in that shard's records
    sound: bool


def listed(past: Iterable[PastKey], unlisted: Collection[str]) -> Iterator[PastKey]:
    """The records of `past` but those of the shards in `unlisted` (their rows file was found
    damaged: the records it gave before the damage are not known to be its shard's)."""
    return (record for record in past if record.file not in unlisted)


def match_bucket(
    rows: Iterable[Printed], past: Iterable[PastKey], unread: Collection[str] = ()
) -> Iterator[PastKey | ManifestRow | ErrorRow]:
    """The records of `past` that stay, then the rows to convert: new keys, changed rows,
    every row of a repeated key, and the rows of records that stay only in a damaged shard (such
    a record is still given: its shard counts it as kept). The records of the archives named
    in `unread` (carried unread, their shards sound) all stay, a row of their key an error.
    Every row and record of a key must be in these."""
    by_key: dict[str, list[Printed]] = {}
    for row, fingerprint in rows:
        by_key.setdefault(row.key, []).append((row, fingerprint))
    carried, taken = set(), set()
    for record in past:
        if unread and key_archive(record.key) in unread:
            yield record
            taken.add(record.key)
            continue
        fingerprints = [fingerprint for _, fingerprint in by_key.get(record.key, ())]
        if stays(fingerprints, record.fingerprint):
            yield record
            if record.sound:
                carried.add(record.key)
    for key, printed in by_key.items():
        if key in taken:
            message = "the key of a member of an archive carried unchanged (--incremental)"
            yield from (error_row(row, Reason.DUPLICATE_KEY, message) for row, _ in printed)
        elif key not in carried:
            yield from (row for row, _ in printed)


def match_buckets(
    buckets: Iterable[tuple[Iterable[Printed], Iterable[PastKey]]],
    convert: Callable[[ManifestRow | ErrorRow], object],
    unread: Collection[str] = (),
) -> dict[str, array]:
    """`match_bucket` of each bucket (its rows, its records), the rows to convert and the
    error rows given to `convert`; returns the positions of the records that stay by published
    shard, ascending: an array of 4-byte positions a shard, all a refresh holds for every
    record it keeps."""
    kept: dict[str, array] = {}
    for rows, past in buckets:
        for item in match_bucket(rows, past, unread):
            if isinstance(item, PastKey):
                kept.setdefault(item.file, array("I")).append(item.position)
            else:
                convert(item)
    return {file: array("I", sorted(positions)) for file, positions in kept.items()}
