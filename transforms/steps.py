"""The Beam steps of a conversion: thin wrappers over the pure modules beside this one.

Element shapes between steps (a RowBatch holds up to ROWS_PER_BATCH ManifestRows):
    ReadManifests   -> RowBatch               (+ "errors": ErrorRow, "skipped": SkippedFile)
    DropDuplicateContent (--dedup) -> {"rows": RowBatch, "errors": ErrorRow}
    PlanDataset     -> DatasetPlan            (one element; a side input downstream)
    AssignShards    -> ((split, index, count), RowBatch of that shard's rows)   (+ "errors")
    WriteShards     -> ShardResult            (+ "errors")
Only manifest rows cross the GroupByKey in WriteShards; image bytes are read after it.
"""

import hashlib
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import AsSingleton, TaggedOutput
from apache_beam.transforms.window import GlobalWindows

from transforms import fileio
from transforms.errors import ErrorRow, Reason, RowError
from transforms.labels import LabelMap
from transforms.manifest import (
    ManifestRow,
    ReadConfig,
    RowBatch,
    manifest_kind,
    read_manifest,
    read_tree,
)
from transforms.plan import PlanAccumulator, ShardCounts, make_plan
from transforms.progress import write_total
from transforms.shard_processes import ShardProcess, ShardTask, run_task, write_shards
from transforms.shard_writer import (
    ShardResult,
    WriteConfig,
    available_cores,
    error_row,
    read_image,
    writer_threads,
)
from transforms.sharding import ShardId, shard_for

NAMESPACE = "tfrecord_pipeline"
# Rows per element between steps: large enough that Beam's per-element cost vanishes, small
# enough that an element stays around a megabyte.
ROWS_PER_BATCH = 1000


def _count_error(error: ErrorRow) -> TaggedOutput:
    Metrics.counter(NAMESPACE, f"error_{error.reason.value}").inc()
    return TaggedOutput("errors", error)


# Declared output types spare Beam from inferring them by walking our bytecode at every launch.
@beam.typehints.with_output_types(RowBatch)
class _ReadManifestFn(beam.DoFn):
    def __init__(self, config: ReadConfig):
        self._config = config

    def process(self, numbered_path):
        number, path = numbered_path
        if manifest_kind(path) == "tree":
            items = read_tree(path, number, self._config)
        else:
            items = read_manifest(path, number, self._config)
        rows = []
        for item in items:
            if isinstance(item, ManifestRow):
                rows.append(item)
                if len(rows) == ROWS_PER_BATCH:
                    yield _row_batch(rows)
                    rows = []
            elif isinstance(item, ErrorRow):
                yield _count_error(item)
            else:
                Metrics.counter(NAMESPACE, "skipped_files").inc()
                yield TaggedOutput("skipped", item)
        if rows:
            yield _row_batch(rows)


def _row_batch(rows: list[ManifestRow]) -> RowBatch:
    Metrics.counter(NAMESPACE, "rows").inc(len(rows))
    return RowBatch(tuple(rows))


class ReadManifests(beam.PTransform):
    """Reads manifests (CSV, JSONL, class-folder trees) into rows, errors and skipped files.

    Args:
      paths: manifest paths, already expanded from globs; their order numbers the manifests,
        which decides which of two rows with the same key is "first".
      config: the split and extra-feature settings every row is read with.
    """

    def __init__(self, paths: list[str], config: ReadConfig):
        super().__init__()
        self._paths = paths
        self._config = config

    def expand(self, pbegin):
        return (
            pbegin
            | "ListManifests" >> beam.Create(list(enumerate(self._paths)))
            | "ParseRows"
            >> beam.ParDo(_ReadManifestFn(self._config)).with_outputs(
                "errors", "skipped", main="rows"
            )
        )


class _PlanStatsFn(beam.CombineFn):
    def create_accumulator(self):
        return PlanAccumulator()

    def add_input(self, accumulator, batch):
        for row in batch.rows:
            accumulator.add(row)
        return accumulator

    def merge_accumulators(self, accumulators):
        merged, *rest = accumulators
        for accumulator in rest:
            merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator.stats()


def _decide_plan(stats, pinned_labels, label_offset, counts, target_shard_mb, progress_dir):
    write_total(progress_dir, sum(rows for _, rows in stats.rows))
    return make_plan(stats, pinned_labels, label_offset, counts, target_shard_mb, fileio.size)


@beam.ptransform_fn
def PlanDataset(
    rows,
    pinned_labels: LabelMap | None,
    label_offset: int,
    counts: ShardCounts,
    target_shard_mb: float,
    progress_dir: str | None,
):
    """All rows → one DatasetPlan: label ids and each split's shard count."""
    return (
        rows
        | "CollectStats" >> beam.CombineGlobally(_PlanStatsFn())
        | "DecideShards"
        >> beam.Map(
            _decide_plan, pinned_labels, label_offset, counts, target_shard_mb, progress_dir
        )
    )


class _ContentDigestFn(beam.DoFn):
    """(sha256 of the image file, row) per row. An unreadable file keeps a unique stand-in
    digest, so it passes on to the shard writer, which reports why it cannot be read."""

    def process(self, batch):
        for row in batch.rows:
            try:
                yield hashlib.sha256(read_image(row.image_uri)).hexdigest(), row
            except RowError:
                yield f"unreadable:{row.key}", row


def _keep_first(digest_rows):
    _, rows = digest_rows
    first, *others = sorted(rows, key=lambda row: (row.position, row.key))
    yield first
    for row in others:
        if row.key == first.key:  # a repeated row: the shard writer reports duplicate_key
            yield row
        else:
            message = f"same bytes as {first.source}"
            yield _count_error(error_row(row, Reason.DUPLICATE_CONTENT, message))


@beam.ptransform_fn
def DropDuplicateContent(batches):
    """Rows whose image bytes repeat an earlier row's become errors (reads every image once
    more; only digests and rows cross the shuffle). Returns {"rows": RowBatch, "errors"}."""
    kept = (
        batches
        | "DigestContent" >> beam.ParDo(_ContentDigestFn())
        | "GroupByContent" >> beam.GroupByKey()
        | "KeepFirst" >> beam.FlatMap(_keep_first).with_outputs("errors", main="rows")
    )
    rebatched = (
        kept.rows  # how many rows a batch holds changes nothing downstream
        | "Rebatch" >> beam.BatchElements(min_batch_size=1, max_batch_size=ROWS_PER_BATCH)
        | "ToRowBatch" >> beam.Map(lambda rows: RowBatch(tuple(rows)))
    )
    return {"rows": rebatched, "errors": kept.errors}


@beam.typehints.with_output_types(tuple[tuple[str, int, int], RowBatch])
class _AssignShardFn(beam.DoFn):
    def process(self, batch, plan):
        by_shard: dict[tuple, list[ManifestRow]] = {}
        for row in batch.rows:
            try:
                plan.labels.id_of(row.label)
            except RowError as error:
                yield _count_error(error_row(row, error.reason, error.message))
                continue
            shard = tuple(shard_for(row.key, row.split, plan.shard_count(row.split)))
            by_shard.setdefault(shard, []).append(row)
        for shard, rows in by_shard.items():
            yield shard, RowBatch(tuple(rows))


@beam.ptransform_fn
def AssignShards(rows, plan):
    """Split each batch by shard; rows whose label has no id become errors here, before shuffle."""
    return rows | "KeyByShard" >> beam.ParDo(_AssignShardFn(), AsSingleton(plan)).with_outputs(
        "errors", main="keyed"
    )


def _all_shards(plan):
    """One empty batch per planned shard, so a shard that gets no rows is still written."""
    for split, count in plan.shards:
        for index in range(count):
            yield (split, index, count), RowBatch(())


@beam.typehints.with_output_types(ShardResult)
class _WriteShardFn(beam.DoFn):
    """Writes each shard as it comes; on a local run with cores to spare (config.processes),
    queues the bundle's shards and writes them in finish_bundle, here and in child processes
    at once (transforms/shard_processes.py)."""

    def __init__(self, config: WriteConfig):
        self._config = config

    def setup(self):
        self._thread_pools: dict[int, ThreadPoolExecutor] = {}
        self._children: list[ShardProcess] = []

    def start_bundle(self):
        self._queued: list[ShardTask] = []

    def process(self, keyed_batches, plan):
        shard, batches = keyed_batches
        task = self._task(ShardId(*shard), [row for batch in batches for row in batch.rows], plan)
        if self._in_children(task.rows, plan):
            self._start_children(self._writers(plan) - 1)
            self._queued.append(task)
        else:
            yield from _shard_outputs(self._write_here(task))

    def finish_bundle(self):
        written = write_shards(self._queued, self._children, self._write_here)
        for output in _shard_outputs(written):
            if isinstance(output, TaggedOutput):
                yield TaggedOutput(output.tag, GlobalWindows.windowed_value(output.value))
            else:
                yield GlobalWindows.windowed_value(output)

    def teardown(self):
        for pool in self._thread_pools.values():
            pool.shutdown()
        for child in self._children:
            child.close()

    def _task(self, shard: ShardId, rows: list[ManifestRow], plan) -> ShardTask:
        """The shard's work, with the threads it gets: its share of the cores, or threads to
        wait on the network when its images are remote."""
        remote = bool(rows) and fileio.is_remote(rows[0].image_uri)
        cores = available_cores()
        if self._in_children(rows, plan):
            cores = max(1, cores // self._writers(plan))
        threads = writer_threads(self._config, remote, cores)
        return ShardTask(shard, rows, plan.labels, self._config, threads)

    def _writers(self, plan) -> int:
        """Shards written at once: one per process on a local run, never more than shards."""
        return max(1, min(self._config.processes, sum(count for _, count in plan.shards)))

    def _in_children(self, rows: list[ManifestRow], plan) -> bool:
        """Whether a shard is shared out with child processes: on local runs with more than one
        writer, for local paths only (`gs://` work waits on the network, where this process's
        threads serve; a child would import Beam and authenticate all over again)."""
        paths = [self._config.output, *(row.image_uri for row in rows[:1])]
        return self._writers(plan) > 1 and not any(map(fileio.is_remote, paths))

    def _start_children(self, count: int) -> None:
        """Started at the first shard, so they load while Beam hands over the rest."""
        while len(self._children) < count:
            self._children.append(ShardProcess())

    def _write_here(self, task: ShardTask) -> Iterator[ErrorRow | ShardResult]:
        return run_task(task, self._thread_pool(task.threads))

    def _thread_pool(self, threads: int) -> ThreadPoolExecutor | None:
        """A pool of `threads`, made once per worker process and kept for every shard."""
        if threads == 1:
            return None
        if threads not in self._thread_pools:
            self._thread_pools[threads] = ThreadPoolExecutor(threads, "image")
        return self._thread_pools[threads]


def _shard_outputs(written: Iterable[ErrorRow | ShardResult]):
    """The writer's outputs as the step's: error rows to "errors", results counted."""
    for item in written:
        if isinstance(item, ErrorRow):
            yield _count_error(item)
        else:
            Metrics.counter(NAMESPACE, "records").inc(item.records)
            Metrics.counter(NAMESPACE, "bytes").inc(item.bytes)
            yield item


class WriteShards(beam.PTransform):
    """Groups row keys by shard and writes every planned shard, one worker per shard.

    Args:
      plan: the DatasetPlan side input (label ids, shard counts).
      config: output folder, image settings and compression of the shards.
    """

    def __init__(self, plan, config: WriteConfig):
        super().__init__()
        self._plan = plan
        self._config = config

    def expand(self, keyed_rows):
        every_shard = self._plan | "ListShards" >> beam.FlatMap(_all_shards)
        return (
            (keyed_rows, every_shard)
            | "AddEmptyShards" >> beam.Flatten()
            | "GroupRowsByShard" >> beam.GroupByKey()
            | "WriteShard"
            >> beam.ParDo(_WriteShardFn(self._config), AsSingleton(self._plan)).with_outputs(
                "errors", main="shards"
            )
        )
