"""`--incremental`: a new version that keeps the published version's unchanged records and
converts only the new and changed rows, decided before anything is written
(transforms/plan/refresh.py `refresh_layout`); what both runners do around that decision: whether
the published version can be refreshed from, its rows files read and its shards checked.

No shard is carried unchecked: each must have the size and CRC-32C its metadata gives (on Cloud
Storage the object's own CRC-32C says so, from the folder's listing or its metadata, without a
byte read; elsewhere every byte is read). A shard that fails, is missing, or whose rows file
cannot be read is damaged: its unchanged rows are converted again from the manifest, and the
summary says so. On this machine (pipeline/runners/local.py) `refresh_here` runs the whole
decision; on Beam, pipeline/runners/beam_refresh.py runs its parts as steps.
"""

import functools
import itertools
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from tfrecord_pipeline.config.options import normalised, option_defaults
from tfrecord_pipeline.dataset.metadata import ShardInfo
from tfrecord_pipeline.dataset.previous import Previous
from tfrecord_pipeline.dataset.shard_check import check_shards
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.fingerprints import row_fingerprints
from tfrecord_pipeline.transforms.plan.refresh import PastShard, RefreshLayout, refresh_layout
from tfrecord_pipeline.transforms.plan.refresh_match import PastKey, match_buckets
from tfrecord_pipeline.transforms.plan.row_buckets import RowBuckets, bucket_count, hash_bucket
from tfrecord_pipeline.transforms.plan.rows_files import (
    DamagedRowsFileError,
    PastRecord,
    read_rows_file,
)
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write.shard_writer import ordered_map
from tfrecord_pipeline.transforms.write.threads import REMOTE_THREADS_PER_CORE

# Recorded options a refresh may differ in: they change no record's bytes (run_key: each night's
# run has its own).
# (label_offset: ids are inherited, and another offset is refused before any work; preset:
# it changes records only through the options it sets, which are compared themselves.)
FREE_OPTIONS = frozenset(
    (
        "num_shards",
        "target_shard_mb",
        "max_error_rate",
        "max_labels",
        "freeze_labels",
        "label_map",
        "label_offset",
        "preset",
        "run_key",
    )
)


def refreshable(previous: Previous | None, recorded: dict) -> bool:
    """Whether --incremental can reuse the published version; says why not when it cannot."""
    why = (
        why_not_refreshable(previous, recorded) if previous else "there is no published version yet"
    )
    if why:
        print(f"tfrecord-pipeline: --incremental: converting every row: {why}", file=sys.stderr)
    return not why


def why_not_refreshable(previous: Previous, recorded: dict) -> str | None:
    """Why the published version's records cannot be reused by a run with these options. An
    option the version's release did not have yet was, for it, what is now its default (a
    release that adds a flag leaves published versions refreshable)."""
    defaults = option_defaults()
    published = normalised(previous.info.options)  # as its values are spelled now
    differ = sorted(
        name
        for name in set(recorded) | set(published)
        if name not in FREE_OPTIONS
        and recorded.get(name) != published.get(name, defaults.get(name))
    )
    if differ:
        return f"options that change records differ from the published version's: {differ}"
    if any(not shard.rows for split in previous.info.splits.values() for shard in split.shards):
        return "the published version has no rows files (it was written before refreshes)"
    return None


def published_shards(previous: Previous) -> list[tuple[str, ShardInfo]]:
    """(split, shard) of every shard of the published version, in its metadata's order."""
    return [
        (name, shard)
        for name, split in sorted(previous.info.splits.items())
        for shard in split.shards
    ]


def past_records(previous: Previous, shard: ShardInfo) -> list[PastRecord] | None:
    """The records a published shard's rows file lists, all read before any is given (Beam's
    check step gives them on, and cannot take back those of a file found damaged midway);
    None when it is damaged."""
    records = opened_records(previous, shard)
    try:
        return None if records is None else list(records)
    except DamagedRowsFileError:
        return None


def opened_records(previous: Previous, shard: ShardInfo) -> Iterator[PastRecord] | None:
    """The records a published shard's rows file lists, read as they are asked for: None when
    it cannot be opened; a damage found further on is raised there (DamagedRowsFileError)."""
    try:
        return read_rows_file(fileio.join(previous.folder, shard.rows), shard.records)
    except DamagedRowsFileError:
        return None


class Refresh(NamedTuple):
    """A local refresh, decided: the new version's shards, the positions of each published
    shard's unchanged records (ascending, 4 bytes each), the rows to convert (read back from
    their bucket as they are iterated, once) and how many of them each split has."""

    layout: RefreshLayout
    kept: dict[str, Sequence[int]]
    to_convert: Iterable[ManifestRow]
    converted: Counter


# Buckets of the local runner's RowBuckets (others are its shard pieces'): rows with their
# fingerprints and published records, by a hash of the key; the rows to convert.
ROWS, RECORDS, TO_CONVERT = "refresh: rows", "refresh: records", "refresh: to convert"
# Rows fingerprinted together: a `gs://` folder's listing serves those of a batch.
FINGERPRINT_ROWS = 10_000


def refresh_here(
    plan: DatasetPlan,
    rows: Iterable[ManifestRow],
    previous: Previous,
    cores: int,
    buckets: RowBuckets,
) -> Refresh:
    """The refresh of `previous` by `rows`, decided: rows fingerprinted a batch at a time, and
    each published shard checked and its rows file read a record at a time, a shard after
    another (on an object store a few opened ahead: each is a request), all into `buckets` by a
    hash of the key (a rows file found damaged midway has its records left out); then
    each bucket matched alone (transforms/plan/refresh_match.py), its rows to convert into a
    bucket of their own; then `refresh_layout`. No step holds every row, record or key."""
    shards = published_shards(previous)
    infos = [shard for _, shard in shards]
    count = bucket_count(plan.row_count + sum(shard.records for shard in infos))
    remote = fileio.is_remote(previous.folder)
    threads = cores * REMOTE_THREADS_PER_CORE
    sound: dict[str, bool] = {}
    unlisted: set[str] = set()  # shards whose rows file is damaged
    with ThreadPoolExecutor(threads, "stat") as pool:
        checked = check_shards(previous.folder, infos, pool.map if remote else map)
        rows = iter(rows)
        while batch := list(itertools.islice(rows, FINGERPRINT_ROWS)):
            for row, fingerprint in zip(batch, row_fingerprints(batch, pool.map), strict=True):
                buckets.add((ROWS, hash_bucket(row.key, count)), (row, fingerprint))
        read = functools.partial(opened_records, previous)
        opened = ordered_map(pool if remote else None, read, infos, threads)  # opened ahead
        for shard, records, ok in zip(infos, opened, checked, strict=True):
            try:
                for position, record in enumerate(records or ()):  # None: it did not open
                    past = PastKey(record.key, record.fingerprint, shard.file, position, ok)
                    buckets.add((RECORDS, hash_bucket(record.key, count)), past)
            except DamagedRowsFileError:
                records = None  # its records given so far are left out of the match
            sound[shard.file] = ok and records is not None
            if records is None:
                unlisted.add(shard.file)
    converted = Counter()

    def convert(row: ManifestRow) -> None:
        converted[row.split] += 1
        buckets.add(TO_CONVERT, row)

    def listed(at: int) -> Iterator[PastKey]:
        return (past for past in buckets.take((RECORDS, at)) if past.file not in unlisted)

    matched = ((buckets.take((ROWS, at)), listed(at)) for at in range(count))
    kept = match_buckets(matched, convert)
    past = [
        PastShard(
            split, shard.file, shard.records, len(kept.get(shard.file, ())), sound[shard.file]
        )
        for split, shard in shards
    ]
    layout = refresh_layout(plan, past, converted)
    return Refresh(layout, kept, buckets.take(TO_CONVERT), converted)
