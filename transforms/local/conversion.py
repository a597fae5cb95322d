"""The conversion on this machine without Beam: each stage's local form (transforms/stages.py),
run in the stages' order.

On one machine Beam buys nothing a conversion needs (there is no shuffle to distribute, and the
write step spreads shards over processes itself) and costs seconds before the first image: its
import, then translating the graph and coding every row between steps. So a conversion given no
Beam flags runs these forms over the functions the Beam steps wrap, and writes the same bytes.

No stage holds every row: rows are counted for the plan as they are read (large manifests in
byte ranges on every core: manifests.py) and put in buckets, held up to a budget and spilled to
a temporary folder beyond it (row_buckets.py), then in buckets by shard piece (on every core),
each read back as a writer takes it (shards.py). Where rows must meet, they meet in buckets by
hash, each grouped alone: --dedup's by a hash of the image digest (plan.py), --incremental's rows
and published records by a hash of the key (refresh.py, which holds only the kept records'
positions, 4 bytes each). Error rows stream to the errors files as they arise (error_sink.py).
"""

import contextlib
import dataclasses
import functools
from collections.abc import Iterable, Iterator
from typing import Any

from tfrecord_pipeline.transforms.local.error_sink import ErrorSink
from tfrecord_pipeline.transforms.local.flushes import Flushes
from tfrecord_pipeline.transforms.local.manifests import gather, read_on, read_rows, split_reads
from tfrecord_pipeline.transforms.local.plan import drop_duplicate_content
from tfrecord_pipeline.transforms.local.pool import ShardPool
from tfrecord_pipeline.transforms.local.refresh import Refresh, finish_here, refresh_here
from tfrecord_pipeline.transforms.local.row_buckets import RowBuckets
from tfrecord_pipeline.transforms.local.shards import (
    Cut,
    shard_tasks,
    sort_rows,
    split_pieces,
    write_in_process,
)
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.plan.carried import Unread
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan, PlanAccumulator, decide_plan
from tfrecord_pipeline.transforms.progress import Progress, Watch
from tfrecord_pipeline.transforms.stages import Forms, Job, PublishInputs, stages_of
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write import error_files
from tfrecord_pipeline.transforms.write.shard_pieces import join_pieces
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult, WriteConfig

ARRIVED = "arrived"  # the bucket of the rows as read, before the plan gives them shards


@dataclasses.dataclass
class LocalRun:
    """A conversion on its way through the stages: what each local form reads and leaves."""

    job: Job
    pool: ShardPool | None  # the writer processes; None writes in this process
    progress: Progress
    errors: ErrorSink  # every error row, on its way to the errors files
    buckets: RowBuckets  # rows by bucket, spilled beyond a budget
    counted: PlanAccumulator | None = None
    skipped: int = 0
    negatives: int = 0
    plan: DatasetPlan | None = None  # the new version's
    write_plan: DatasetPlan | None = None  # the shards the rows are written in
    rows: Iterable[ManifestRow] = ()
    split_rows: dict[str, int] = dataclasses.field(default_factory=dict)  # rows to write
    refresh: Refresh | None = None  # --incremental's decision
    results: list[ShardResult] = dataclasses.field(default_factory=list)
    pieces: dict[str, Cut] = dataclasses.field(default_factory=dict)  # a split's shards'
    sample: list[ManifestRow] = dataclasses.field(default_factory=list)  # where images are
    inputs: PublishInputs | None = None
    info: Any = None  # what the publish stage returned


@contextlib.contextmanager
def writer_processes(write: WriteConfig) -> Iterator[ShardPool | None]:
    """The shard-writer processes a local run of `write`'s shards uses, or None (one core, or
    files on an object store: a worker would authenticate all over again). Started first of
    all, before any thread of the run starts, so the command's workers can be forks: ready at
    once, with nothing to import."""
    if write.processes > 1 and not fileio.is_remote(write.staging):
        with ShardPool(write.processes, write.image) as pool:
            yield pool
    else:
        yield None


def run_here(job: Job, pool: ShardPool | None, watch: Watch) -> Any:
    """Run `job`'s stages in this process and the `pool`'s (writer_processes), reporting to
    the observer `watch` gives; returns what its publish stage returns."""
    with watch as progress, RowBuckets() as buckets:
        errors = ErrorSink(job.write.staging)
        run = LocalRun(job, pool, progress, errors, buckets)
        for stage in stages_of(job):
            FORMS[stage.name](run)
        return run.info


# Each stage's local form, by the stage's name (transforms/stages.py gives their order).
FORMS = Forms()


@FORMS.of("ReadManifests")
def read_manifests(run: LocalRun) -> None:
    """manifests.py: ranges on every core.

    Every manifest's rows counted for the plan and put in their bucket as read: a large one in
    byte ranges, on the writer processes too."""
    job = run.job
    counting = functools.partial(PlanAccumulator, job.plan.counts, max_labels=job.plan.max_labels)
    run.counted = counted = counting()

    def keep(row: ManifestRow) -> None:
        counted.add(row)
        run.buckets.add(ARRIVED, row)

    here, there = (
        split_reads(job.manifests, job.write.processes) if run.pool else (job.manifests, [])
    )
    staging = job.write.staging
    reads = read_on(run.pool, there, job.read, counting, run.buckets, ARRIVED, staging)
    run.skipped, negatives = read_rows(here, job.read, run.errors, keep)
    skipped, negatives_there = gather(reads, counted, run.buckets, run.errors)
    run.skipped, run.negatives = run.skipped + skipped, negatives + negatives_there


@FORMS.of("PlanDataset")
def plan_dataset(run: LocalRun) -> None:
    """decide_plan over the counted rows."""
    run.plan = run.write_plan = decide_plan(run.counted.stats(), run.job.plan)
    run.progress.planned(run.plan.row_count)
    run.rows, run.split_rows = run.buckets.take(ARRIVED), dict(run.plan.rows)


@FORMS.of("DropDuplicateContent")
def drop_duplicates(run: LocalRun) -> None:
    """plan.py: rows by a hash of digest."""
    # After the plan, which counts every row, so rows = records + errors.
    count, max_bytes = run.plan.row_count, run.job.max_file_bytes
    run.rows = drop_duplicate_content(run.rows, count, max_bytes, run.errors, run.buckets)


@FORMS.of("RefreshRows")
def refresh_rows(run: LocalRun) -> None:
    """refresh.py refresh_here."""
    job = run.job
    unread = Unread(job.carried, job.read)
    update = refresh_here(
        run.plan, run.rows, job.published, job.write.processes, run.buckets, run.errors.add, unread
    )
    run.refresh, run.plan, run.write_plan = update, update.layout.plan, update.layout.write_plan
    run.rows, run.split_rows = update.to_convert, update.converted


@FORMS.of("AssignShards")
def assign_shards(run: LocalRun) -> None:
    """shards.py: rows into piece buckets."""
    processes = run.job.write.processes if run.pool else 1
    run.pieces = split_pieces(run.write_plan, run.split_rows, processes, run.job.write)
    run.sample = sort_rows(
        run.rows, run.write_plan, run.pieces, run.errors.add, run.buckets, run.pool
    )
    run.rows = ()


@FORMS.of("WriteShards")
def write_shards(run: LocalRun) -> None:
    """pool.py: a writer process a core."""
    config = run.job.write._replace(sync=False)  # flushed here, as they come: flushes.py
    tasks, writers = shard_tasks(run.buckets, run.write_plan, run.pieces, config, run.sample)
    if run.pool and writers > 1:
        written = run.pool.write(tasks, run.progress)
    else:
        written = write_in_process(tasks, run.progress)
    with Flushes(config.staging) as flushes:
        flushing = map(flushes.flushed, run.errors.passed(written))
        run.results = list(join_pieces(flushing, config.staging, config.shard_format))


@FORMS.of("CarryPublished")
def carry_published(run: LocalRun) -> None:
    """refresh.py finish_here."""
    run.results = finish_here(
        run.refresh, run.job.published, run.job.write.staging, run.progress, run.results
    )


@FORMS.of("WriteErrors")
def write_errors(run: LocalRun) -> None:
    """error_sink.py: streamed as they come."""
    files, tally = run.errors.finish(error_files.ROWS_PER_ERRORS_FILE)
    counts = run.refresh.layout.counts if run.refresh else None
    run.inputs = PublishInputs(
        run.plan, run.results, files, tally, run.skipped, run.negatives, counts
    )


@FORMS.of("CommitDataset")
def commit_dataset(run: LocalRun) -> None:
    """the job's publish step, here."""
    run.info = run.job.publish(run.inputs)
