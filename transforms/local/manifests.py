"""The local runner's manifests read on every core: a CSV, JSONL or Parquet manifest on this
machine's disk of more than READ_RANGE_BYTES is read in byte ranges (`read_piece`: the records a
range owns, as Beam's workers read theirs), the first here and one on each writer process, so
the cores are not kept waiting for this process's reading before the first shard. A process
counts its range's rows for the plan (a PlanAccumulator, merged here: the plan is a function of
the rows, not of who counted them), spills them into the run's row buckets' folder for this
process to adopt (transforms/local/row_buckets.py), and its error rows into staging.

Archives on this machine's disk, when there are several, are each read whole by a process
(archives are the unit of parallel work: a compressed tar's listing decompresses and copies it),
neighbours together: ARCHIVE_GROUPS groups a process, of about equal bytes. What a read costs
beyond its rows (its batch spilled, then sorted into shard pieces on a process, a file a piece,
and its results sent back: about a millisecond) is then paid a few times a process, not once an
archive (a folder of thousands of small WebDataset shards).
Folder trees, COCO files (one JSON document), small manifests and those on an object store (a
worker would authenticate all over again) are read here, while the processes read theirs.
"""

import itertools
from collections.abc import Callable, Hashable, Iterator
from typing import NamedTuple

from tfrecord_pipeline.transforms.local.error_sink import ErrorSink, SpilledErrors
from tfrecord_pipeline.transforms.local.pool import ShardPool
from tfrecord_pipeline.transforms.local.row_buckets import RowBuckets, Spilled
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig, SkippedFile
from tfrecord_pipeline.transforms.manifest.sources import (
    WHOLE_KINDS,
    ManifestFile,
    read_all,
    read_piece,
)
from tfrecord_pipeline.transforms.plan.dataset import PlanAccumulator
from tfrecord_pipeline.transforms.storage import fileio

# A range of a manifest read on another process holds at least this much (~25,000 rows of
# short lines): a smaller one is over before a process would take it.
READ_RANGE_BYTES = 1 << 20
# Groups of neighbouring archives a process reads (each whole, in turn): more than one, so that
# a process slowed by other work leaves its last group to the others.
ARCHIVE_GROUPS = 2
# Rows a process spills at once: batches small enough to be shared out evenly when they are
# sorted into shard pieces (transforms/local/shards.py `sort_rows`).
BATCH_ROWS = 10_000


class RangeRead(NamedTuple):
    """What a process read in a range (or an archive): its rows counted, their spilled
    batches in their bucket, its error rows, how many negatives --drop_negatives left out, and
    how many files an archive skipped."""

    counted: PlanAccumulator
    rows: list[tuple[Hashable, Spilled]]
    errors: SpilledErrors
    negatives: int
    skipped: int = 0


Part = tuple[tuple[ManifestFile, ...], int, int]  # a process's read: a range, or archives


def split_reads(
    manifests: list[ManifestFile], processes: int
) -> tuple[list[ManifestFile], list[Part]]:
    """The manifests read here (of one read in ranges, its first range: the manifest as if it
    ended there), and the processes' reads: the byte ranges of those read in ranges, and
    groups of neighbouring local archives (`archive_groups`), in the manifests' order."""
    here, there, archives = [], [], []

    def local_archive(manifest: ManifestFile) -> bool:
        return manifest.kind == "archive" and not fileio.is_remote(manifest.path)

    spread = sum(map(local_archive, manifests)) > 1
    for manifest in manifests:
        if spread and local_archive(manifest):
            archives.append(manifest)  # read whole, by a process, with its neighbours
            continue
        there += archive_groups(archives, processes)
        archives = []
        bounds = range_bounds(manifest, processes)
        here.append(manifest._replace(size=bounds[1]) if len(bounds) > 2 else manifest)
        there += [((manifest,), start, end) for start, end in itertools.pairwise(bounds[1:])]
    return here, there + archive_groups(archives, processes)


def archive_groups(archives: list[ManifestFile], processes: int) -> list[Part]:
    """Neighbouring `archives` in ARCHIVE_GROUPS groups a process (or one each, when fewer),
    of about equal bytes: each goes to the group its middle byte falls in."""
    count = min(len(archives), processes * ARCHIVE_GROUPS)
    total, before = sum(max(1, archive.size) for archive in archives), 0
    groups: list[list[ManifestFile]] = [[] for _ in range(count)]
    for archive in archives:
        size = max(1, archive.size)
        groups[(2 * before + size) * count // (2 * total)].append(archive)
        before += size
    return [(tuple(group), 0, 0) for group in groups if group]


def range_bounds(manifest: ManifestFile, processes: int) -> list[int]:
    """Where the byte ranges a manifest is read in begin and end: one for this process and one
    for each of `processes`, none of under READ_RANGE_BYTES; two (it is read whole) for a
    folder tree, a COCO file, or a file on an object store."""
    body = manifest.size - manifest.body
    if manifest.kind in WHOLE_KINDS or fileio.is_remote(manifest.path):
        return [manifest.body, manifest.size]
    count = max(1, min(processes + 1, body // READ_RANGE_BYTES))
    return [manifest.body + body * index // count for index in range(count + 1)]


def read_on(
    pool: ShardPool | None,
    ranges: list[Part],
    config: ReadConfig,
    counting: Callable[[], PlanAccumulator],
    buckets: RowBuckets,
    bucket: Hashable,
    staging: str,
) -> Iterator[RangeRead]:
    """Starts the `pool`'s processes reading `ranges`, each counting its rows in an
    accumulator `counting` makes and spilling them into `bucket` of `buckets`' folder; their
    results, as what this returns is read."""
    if not ranges:
        return iter(())
    folder = buckets.folder()
    calls = [(*part, config, counting, folder, bucket, staging) for part in ranges]
    return pool.spread(read_range, calls)


def read_range(
    manifests: tuple[ManifestFile, ...],
    start: int,
    end: int,
    config: ReadConfig,
    counting: Callable[[], PlanAccumulator],
    folder: str,
    bucket: Hashable,
    staging: str,
) -> RangeRead:
    """On a pool process: the rows of the byte range [start, end) of a manifest, or of
    archives each read whole, in turn (`manifests`), counted and spilled into `bucket` in
    `folder` (in an accumulator `counting` makes); its error rows spilled into `staging` when
    many."""
    counted, errors, negatives, skipped = counting(), ErrorSink(staging), 0, 0
    rows = RowBuckets(BATCH_ROWS, folder)
    read = itertools.chain.from_iterable(
        read_all(manifest, config)  # an archive, read whole
        if manifest.kind in WHOLE_KINDS
        else read_piece(manifest, start, end, config)
        for manifest in manifests
    )
    for item in errors.passed(read):
        if isinstance(item, ManifestRow):
            counted.add(item)
            rows.add(bucket, item)
        elif isinstance(item, SkippedFile):
            skipped += 1
        else:  # a negative --drop_negatives left out
            negatives += 1
    return RangeRead(counted, rows.spill_all(), errors.spilled(), negatives, skipped)


def gather(
    reads: Iterator[RangeRead], counted: PlanAccumulator, buckets: RowBuckets, errors: ErrorSink
) -> tuple[int, int]:
    """The processes' reads merged into this process's `counted`, `buckets` and `errors`;
    returns their skipped files and negatives."""
    skipped = negatives = 0
    for read in reads:
        counted.merge(read.counted)
        for bucket, batch in read.rows:
            buckets.adopt(bucket, batch)
        errors.adopt(read.errors)
        skipped, negatives = skipped + read.skipped, negatives + read.negatives
    return skipped, negatives


def read_rows(
    manifests: list[ManifestFile],
    config: ReadConfig,
    errors: ErrorSink,
    keep: Callable[[ManifestRow], object],
) -> tuple[int, int]:
    """Every manifest's rows, each given to `keep`; the records that are errors go to
    `errors`. Returns how many files a folder tree skipped and how many negatives
    --drop_negatives left out. Each manifest is read whole here, by the rules its pieces are
    read by on Beam."""
    skipped = negatives = 0
    for manifest in manifests:
        for item in errors.passed(read_all(manifest, config)):
            if isinstance(item, ManifestRow):
                keep(item)
            elif isinstance(item, SkippedFile):
                skipped += 1
            else:
                negatives += 1
    return skipped, negatives
