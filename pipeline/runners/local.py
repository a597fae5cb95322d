"""The conversion on this machine without Beam: the pipeline's steps, called in order.

On one machine Beam buys nothing a conversion needs (there is no shuffle to distribute, and the
write step spreads shards over processes itself) and costs seconds before the first
image: its import, then translating the graph and coding every row between steps. So a
conversion given no Beam flags calls the functions the Beam steps wrap (transforms/beam/),
in the same order, and writes the same bytes; any Beam flag (`--runner DirectRunner`,
`--runner DataflowRunner`, ...) runs the Beam pipeline instead (pipeline/runners/beam_pipeline.py).

No step holds every row: rows are counted for the plan as they are read (large manifests in
byte ranges on every core: transforms/local/manifests.py) and put in buckets, held up to a
budget and spilled to a temporary folder beyond it (transforms/local/row_buckets.py), then in
buckets by shard piece (on every core), each read back as a writer takes it
(transforms/local/shards.py). Where rows must meet, they meet in buckets by hash, each
grouped alone: --dedup's by a hash of the image digest (`drop_duplicate_content`),
--incremental's rows and published records by a hash of the key (transforms/local/refresh.py,
which holds only the kept records' positions, 4 bytes each). So memory stays flat however many
rows. Error rows stream to the errors files as they arise (transforms/local/error_sink.py).
"""

import contextlib
import functools
import itertools
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from tfrecord_pipeline.config.conversion import Conversion
from tfrecord_pipeline.config.runner_choice import local_processes
from tfrecord_pipeline.dataset.commit import CommitInputs, commit_dataset
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.dataset.previous import previous_version
from tfrecord_pipeline.dataset.publish import Target
from tfrecord_pipeline.runners.refreshable import refreshable
from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.local.error_sink import ErrorSink
from tfrecord_pipeline.transforms.local.manifests import gather, read_on, split_reads
from tfrecord_pipeline.transforms.local.pool import ShardPool, ShardTask, ShardWriter
from tfrecord_pipeline.transforms.local.refresh import finish_here, refresh_here
from tfrecord_pipeline.transforms.local.row_buckets import RowBuckets, bucket_count, hash_bucket
from tfrecord_pipeline.transforms.local.shards import shard_tasks, sort_rows, split_pieces
from tfrecord_pipeline.transforms.manifest.rows import (
    ManifestRow,
    ReadConfig,
    SkippedFile,
)
from tfrecord_pipeline.transforms.manifest.sources import ManifestFile, read_all
from tfrecord_pipeline.transforms.plan.dataset import PlanAccumulator, decide_plan
from tfrecord_pipeline.transforms.plan.dedup import content_digest, first_of_each
from tfrecord_pipeline.transforms.progress import UNWATCHED, Progress, Watch
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write import error_files
from tfrecord_pipeline.transforms.write.shard_pieces import join_pieces
from tfrecord_pipeline.transforms.write.shard_writer import (
    IN_FLIGHT_PER_THREAD,
    ShardResult,
    ordered_map,
)
from tfrecord_pipeline.transforms.write.threads import REMOTE_THREADS_PER_CORE, available_cores

ARRIVED = "arrived"  # the bucket of the rows as read, before the plan gives them shards
DIGESTS = "digests"  # --dedup's buckets (with a number each): rows with their image's digest


def convert_here(conversion: Conversion, target: Target, watch: Watch) -> DatasetInfo:
    """Run the whole conversion into `target`, in this process and its shard-writer
    processes, reporting to the observer `watch` gives."""
    with contextlib.ExitStack() as stack:
        inputs = write_here(conversion, target, stack, watch)
        return commit_dataset(conversion.commit_config(target), inputs)


def write_here(
    conversion: Conversion,
    target: Target,
    stack: contextlib.ExitStack,
    watch: Watch = UNWATCHED,
) -> CommitInputs:
    """Every step before the commit: shards and errors files staged for `target`; returns
    what the commit step is given. The shard-writer processes and the observer `watch` gives
    (a progress bar) live on in `stack`."""
    options = conversion.options
    processes = local_processes(options.processes)
    config = conversion.write_config(target.staging, processes)
    pool = None
    if processes > 1 and not fileio.is_remote(options.output):
        # First of all, before any thread of this run starts (a bar's starts next), so the
        # command's workers can be forks: ready at once, with nothing to import.
        pool = stack.enter_context(ShardPool(processes, config.image))
    progress = stack.enter_context(watch)
    previous = previous_version(target, options.label_offset)
    manifests, read_config = conversion.manifests()
    errors = ErrorSink(target.staging)  # every error row, on its way to the errors files
    inherited = previous.labels() if previous else None
    plan_config = conversion.plan_config(inherited, read_config.detection)
    counting = functools.partial(
        PlanAccumulator, plan_config.counts, max_labels=plan_config.max_labels
    )
    counted = counting()
    buckets = stack.enter_context(RowBuckets())  # rows by bucket, spilled beyond a budget

    def keep(row: ManifestRow) -> None:
        counted.add(row)
        buckets.add(ARRIVED, row)

    here, there = split_reads(manifests, processes) if pool else (manifests, [])
    reads = read_on(pool, there, read_config, counting, buckets, ARRIVED, target.staging)
    skipped, negatives = read_rows(here, read_config, errors, keep)
    negatives += gather(reads, counted, buckets, errors)
    plan = decide_plan(counted.stats(), plan_config)
    progress.planned(plan.row_count)
    rows: Iterable[ManifestRow] = buckets.take(ARRIVED)
    if options.dedup:  # after the plan, which counts every row, so rows = records + errors
        rows = drop_duplicate_content(rows, plan.row_count, options.max_file_bytes, errors, buckets)
    update, split_rows = None, dict(plan.rows)
    if options.incremental and refreshable(previous, options.recorded()):
        update = refresh_here(plan, rows, previous.published(), processes, buckets)
        plan, rows, split_rows = update.layout.plan, update.to_convert, update.converted
    write_plan = update.layout.write_plan if update else plan
    pieces = split_pieces(write_plan, split_rows, processes if pool else 1, config)
    sample = sort_rows(rows, write_plan, pieces, errors.add, buckets, pool)
    del rows
    tasks, writers = shard_tasks(buckets, write_plan, pieces, config, sample)
    if pool and writers > 1:
        written = pool.write(tasks, progress)
    else:
        written = write_in_process(tasks, progress)
    results = list(join_pieces(errors.passed(written), config.staging, config.shard_format))
    if update:
        results = finish_here(update, previous.published(), target.staging, progress, results)
    files, tally = errors.finish(error_files.ROWS_PER_ERRORS_FILE)
    counts = update.layout.counts if update else None
    return CommitInputs(plan, results, files, tally, skipped, negatives, counts)


def write_in_process(
    tasks: Iterable[ShardTask], progress: Progress
) -> Iterator[ErrorRow | ShardResult]:
    writer = ShardWriter()
    try:
        for task in tasks:
            yield from writer.write(task, progress)
    finally:
        writer.close()


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


def drop_duplicate_content(
    rows: Iterable[ManifestRow],
    count: int,
    max_file_bytes: int,
    errors: ErrorSink,
    buckets: RowBuckets,
) -> Iterator[ManifestRow]:
    """The rows left once those whose image bytes repeat an earlier row's went to `errors` as
    error rows: each of the `count` rows with its file's digest into `buckets` by a hash of the
    digest, then each bucket grouped alone as it is read (the rows of one digest are held
    together, as Beam's GroupByKey gives them). The files are read and hashed on threads (file
    reads and SHA-256 release the GIL): many per core for `gs://`."""
    rows = iter(rows)
    first = next(rows, None)
    if first is None:
        return iter(())
    remote = fileio.is_remote(first.image_uri)
    threads = available_cores() * (REMOTE_THREADS_PER_CORE if remote else 1)
    shares = bucket_count(count)

    def digested(row: ManifestRow) -> tuple[str, ManifestRow]:
        return content_digest(row, max_file_bytes), row

    with ThreadPoolExecutor(threads, "digest") as pool:
        # A window of futures, not Executor.map's one a row submitted at once (~1 KB each).
        window = threads * IN_FLIGHT_PER_THREAD
        for digest, row in ordered_map(pool, digested, itertools.chain([first], rows), window):
            buckets.add((DIGESTS, hash_bucket(digest, shares)), (digest, row))
    groups = (first_of_each(buckets.take((DIGESTS, share))) for share in range(shares))
    return errors.passed(itertools.chain.from_iterable(groups))
