"""`--incremental` on this machine: a new version that keeps the published version's unchanged
records and converts only the new and changed rows, decided before anything is written
(transforms/plan/refresh.py `refresh_layout`), then its files staged and assembled
(transforms/write/carried.py). The Beam form runs the same parts as steps
(transforms/beam/refresh.py); whether a published version can be refreshed from at all is the
pipeline's to say (pipeline/runners/refreshable.py).

No shard is carried unchecked: each must have the size and CRC-32C its metadata gives (on Cloud
Storage the object's own CRC-32C says so, from the folder's listing or its metadata, without a
byte read; elsewhere every byte is read: transforms/storage/file_checks.py). A shard that
fails, is missing, or whose rows file cannot be read is damaged: its unchanged rows are
converted again from the manifest, and the summary says so. An archive carried unread
(transforms/plan/carried.py) with a record in a damaged shard (any, when a rows file is
damaged: its keys are not all known) is listed after all, and refreshed as if not carried.
"""

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from tfrecord_pipeline.transforms.archive.members import key_archive
from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.local.row_buckets import RowBuckets, bucket_count, hash_bucket
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig
from tfrecord_pipeline.transforms.manifest.sources import read_all
from tfrecord_pipeline.transforms.plan.carried import NOTHING_UNREAD, Unread
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.fingerprints import row_fingerprints
from tfrecord_pipeline.transforms.plan.refresh import PastShard, RefreshLayout, refresh_layout
from tfrecord_pipeline.transforms.plan.refresh_match import listed, match_buckets
from tfrecord_pipeline.transforms.progress import Progress
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.storage.file_checks import check_shards
from tfrecord_pipeline.transforms.write.carried import assemble, stage_past
from tfrecord_pipeline.transforms.write.in_flight import ordered_map
from tfrecord_pipeline.transforms.write.published import PublishedVersion, listed_keys
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult
from tfrecord_pipeline.transforms.write.threads import REMOTE_THREADS_PER_CORE


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


def listed_rows(manifests, config: ReadConfig, errors: Callable) -> Iterator[ManifestRow]:
    """The rows of carried archives listed after all; their error rows to `errors`."""
    for manifest in manifests:
        for item in read_all(manifest, config):
            if isinstance(item, ManifestRow):
                yield item
            elif isinstance(item, ErrorRow):
                errors(item)


def refresh_here(
    plan: DatasetPlan,
    rows: Iterable[ManifestRow],
    published: PublishedVersion,
    cores: int,
    buckets: RowBuckets,
    errors: Callable[[ErrorRow], object],
    unread: Unread = NOTHING_UNREAD,
) -> Refresh:
    """The refresh of `published` by `rows`, decided: rows fingerprinted a batch at a time, and
    each published shard checked and its rows file read a record at a time, a shard after
    another (on an object store a few opened ahead: each is a request), all into `buckets` by a
    hash of the key; then each bucket matched alone (transforms/plan/refresh_match.py), the
    records of a rows file found damaged midway left out, its rows to convert into a bucket of
    their own; then `refresh_layout`. No step holds every row, record or key."""
    infos = [shard for _, shard in published.shards]
    count = bucket_count(plan.row_count + sum(shard.records for shard in infos))
    remote = fileio.is_remote(published.folder)
    threads = cores * REMOTE_THREADS_PER_CORE
    unlisted: set[str] = set()  # shards whose rows file is damaged
    damaged: set[str] = set()  # archives with records in a damaged shard
    with ThreadPoolExecutor(threads, "stat") as pool:

        def fingerprinted(rows: Iterable[ManifestRow]) -> None:
            rows = iter(rows)
            while batch := list(itertools.islice(rows, FINGERPRINT_ROWS)):
                for row, fingerprint in zip(batch, row_fingerprints(batch, pool.map), strict=True):
                    buckets.add((ROWS, hash_bucket(row.key, count)), (row, fingerprint))

        checks = check_shards(published.folder, infos, pool.map if remote else map)  # begun
        fingerprinted(rows)
        checked = dict(zip([shard.file for shard in infos], checks, strict=True))

        def read(shard):
            return listed_keys(published, shard, checked[shard.file], unlisted)

        for records in ordered_map(pool if remote else None, read, infos, threads):  # ahead
            for past in records:
                if not past.sound and unread.manifests:
                    damaged.add(key_archive(past.key))
                buckets.add((RECORDS, hash_bucket(past.key, count)), past)
        relisted, names = unread.listed(damaged, bool(unlisted))
        fingerprinted(listed_rows(relisted, unread.config, errors))
    converted = Counter()

    def convert(row: ManifestRow | ErrorRow) -> None:
        if isinstance(row, ErrorRow):
            errors(row)
            return
        converted[row.split] += 1
        buckets.add(TO_CONVERT, row)

    matched = (
        (buckets.take((ROWS, at)), listed(buckets.take((RECORDS, at)), unlisted))
        for at in range(count)
    )
    kept = match_buckets(matched, convert, names)
    past = [
        PastShard(
            split,
            shard.file,
            shard.records,
            len(kept.get(shard.file, ())),
            checked[shard.file] and shard.file not in unlisted,
        )
        for split, shard in published.shards
    ]
    layout = refresh_layout(plan, past, converted)
    return Refresh(layout, kept, buckets.take(TO_CONVERT), converted)


def finish_here(
    update: Refresh, published: PublishedVersion, staging: str, progress: Progress, written: list
) -> list[ShardResult]:
    """The local runner's refresh, its converted rows' shards `written`: the published
    shards' kept records staged, each told to `progress`, then every final shard assembled."""
    shards = published.by_file()
    carried = {}
    for source, final in update.layout.past_sources():
        shard = shards[source.file]
        positions = update.kept[source.file]
        result = stage_past(published, source, shard, positions, final, staging)
        progress.carried(result.staged, result.records)
        carried[source.file] = result
    return assemble(update.layout, written, carried, staging, published.shard_format)
