"""The local runner's rows on their way to its shard writers, never all held at once: put in
buckets by shard piece and run (transforms/local/row_buckets.py: held up to a budget, spilled
to disk beyond it; the batches it spilled as it read sorted on its writer processes), then taken
a piece at a time as a writer gets ready for it, which reads the piece's spilled rows itself.

A shard is written in pieces, each by a writer of its own, joined after
(transforms/write/shard_pieces.py), only when it holds more than its share of the rows of the
run's processes (transforms/plan/sharding.py `local_pieces`): so that every core writes. A
piece of more rows than a writer should hold, or a shard --num_shards makes large (which Beam
writes in the plan's pieces), is written by one writer in runs (`piece_runs`), one after
another into its one file: a join would copy every byte once more and sync it again. The cuts
of a split's shards are decided from the rows it is given, before they are sorted into shards:
hash partitioning fills every shard alike.
"""

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.local.pool import ShardPool
from tfrecord_pipeline.transforms.local.row_buckets import RowBuckets, TakenRows, release
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.grouping import all_shards, shards_of
from tfrecord_pipeline.transforms.plan.sharding import Piece, local_pieces, piece_runs, row_piece
from tfrecord_pipeline.transforms.progress import Progress
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult, SortedRuns, WriteConfig
from tfrecord_pipeline.transforms.write.tasks import ShardTask, ShardWriter, shard_task


class Cut(NamedTuple):
    """How a split's shards are written: in `pieces`, each by a writer of its own and joined
    after, each piece in `runs` written one after another. A row's bucket is its run among
    `parts` (`row_piece` of that many: piece `part // runs`, as `piece_of` would give)."""

    pieces: int = 1
    runs: int = 1

    @property
    def parts(self) -> int:
        return self.pieces * self.runs


def split_pieces(
    plan: DatasetPlan, split_rows: Mapping[str, int], processes: int, config: WriteConfig
) -> dict[str, Cut]:
    """The cut of each split's shards, from the rows the split is given (`split_rows`). Pieces
    of files that do not join end to end (gzip, ArrayRecord) would be joined by writing their
    records again (transforms/write/shard_pieces.py), more work than the cores save: such
    shards are written whole, in runs."""
    total = sum(split_rows.values())
    cuts = {}
    for split, count in plan.shards:
        shard_rows = split_rows.get(split, 0) // count
        shared = config.shard_format.concatenates
        pieces = local_pieces(shard_rows, total, processes) if shared else 1
        cuts[split] = Cut(pieces, piece_runs(shard_rows // pieces))
    return cuts


def bucket_rows(
    rows: Iterable[ManifestRow],
    plan: DatasetPlan,
    pieces: Mapping[str, Cut],
    reject: Callable[[ErrorRow], object],
    buckets: RowBuckets,
) -> list[ManifestRow]:
    """Puts each row in the bucket of its shard's run (error rows to `reject`); returns the
    first row, if any: a sample of where the images are."""
    first = []
    for shard, row in shards_of(rows, plan, reject):
        parts = pieces[shard.split].parts
        buckets.add((shard, row_piece(row, shard.count, parts)), row)
        first = first or [row]
    return first


# Most buckets (shard runs) the rows are sorted into on the pool: each process's batch makes a
# file a bucket, and more would hold few rows each.
SPREAD_BUCKETS = 256


def sort_rows(
    rows: TakenRows | list[ManifestRow],
    plan: DatasetPlan,
    pieces: Mapping[str, Cut],
    reject: Callable[[ErrorRow], object],
    buckets: RowBuckets,
    pool: ShardPool | None,
) -> list[ManifestRow]:
    """`bucket_rows`, the rows' spilled batches (those of `TakenRows`) sorted on the `pool`'s
    processes, a batch each, into batches of `buckets`' folder that it adopts, while this
    process sorts the rows held: the cores share what would keep them waiting for it."""
    buckets_made = sum(count * pieces[split].parts for split, count in plan.shards)
    spread = pool and isinstance(rows, TakenRows) and buckets_made <= SPREAD_BUCKETS
    spilled = rows.spilled() if spread else []
    lean = plan._replace(archives=())  # the commit's, not pickled again with every batch
    calls = [(batch, lean, pieces, buckets.folder()) for batch in spilled]
    results = pool.spread(sort_batch, calls) if calls else ()
    held = rows.held() if calls else rows
    first = bucket_rows(held, plan, pieces, reject, buckets)
    for batches, errors, sample in results:
        for bucket, batch in batches:
            buckets.adopt(bucket, batch)
        for error in errors:
            reject(error)
        first = first or sample
    return first


def sort_batch(
    rows: TakenRows, plan: DatasetPlan, pieces: Mapping[str, Cut], folder: str
) -> tuple[list, list[ErrorRow], list[ManifestRow]]:
    """On a pool process: `bucket_rows` of `rows`, every bucket spilled into `folder` (beyond
    the budget as they come), for its owner to adopt; with the error rows and the first row."""
    errors: list[ErrorRow] = []
    sorted_rows = RowBuckets(folder=folder)
    first = bucket_rows(rows, plan, pieces, errors.append, sorted_rows)
    return sorted_rows.spill_all(), errors, first


def shard_tasks(
    buckets: RowBuckets,
    plan: DatasetPlan,
    pieces: Mapping[str, Cut],
    config: WriteConfig,
    sample: list[ManifestRow],
) -> tuple[Iterator[ShardTask], int]:
    """A task for every planned shard's every piece (one that got no rows is still written),
    the largest shard first (the last to finish is short), its pieces in order (each is joined
    to those before it as it ends: transforms/write/shard_pieces.py), each made with its rows
    (its runs') as it is asked for; and how many are written at once."""
    parts = [
        (shard, Piece(index, pieces[shard.split].pieces))
        for shard in all_shards(plan)
        for index in range(pieces[shard.split].pieces)
    ]
    shard_rows = Counter()
    for shard in all_shards(plan):
        cut = pieces[shard.split]
        shard_rows[shard] = sum(buckets.count((shard, part)) for part in range(cut.parts))
    parts.sort(key=lambda part: (-shard_rows[part[0]], part[0], part[1].index))
    writers = writers_at_once(config, sample, len(parts))

    def tasks() -> Iterator[ShardTask]:
        for shard, piece in parts:  # a writer process reads the rows its piece spilled itself,
            runs = pieces[shard.split].runs  # kept for another that may share it (local/tail.py)
            taken = [
                buckets.take((shard, piece.index * runs + run), keep=True) for run in range(runs)
            ]
            rows = taken[0] if runs == 1 else SortedRuns(taken)
            yield shard_task(shard, rows, plan, config, writers, piece, sample)

    return tasks(), writers


def writers_at_once(config: WriteConfig, rows: list[ManifestRow], tasks: int) -> int:
    """Shards (or pieces) the local runner writes at once: one per process (never more than
    `tasks`) for local paths; 1 for `gs://` work, which waits on the network, where this
    process's threads serve (a worker would import Beam and authenticate all over again)."""
    if any(map(fileio.is_remote, [config.staging, *(row.image_uri for row in rows[:1])])):
        return 1
    return max(1, min(config.processes, tasks))


def write_in_process(
    tasks: Iterable[ShardTask], progress: Progress
) -> Iterator[ErrorRow | ShardResult]:
    writer = ShardWriter()
    try:
        for task in tasks:
            yield from writer.write(task, progress)
            release(task.rows)
    finally:
        writer.close()
