"""The conversion on this machine without Beam: the pipeline's steps, called in order.

On one machine Beam buys nothing a conversion needs (there is no shuffle to distribute, and the
write step spreads shards over processes itself) and costs seconds before the first
image: its import, then translating the graph and coding every row between steps. So a
conversion given no Beam flags calls the functions the Beam steps wrap (transforms/beam/),
in the same order, and writes the same bytes; any Beam flag (`--runner DirectRunner`,
`--runner DataflowRunner`, ...) runs the Beam pipeline instead (pipeline/runners/beam_pipeline.py).

Rows are held in memory, as the DirectRunner holds them: a few hundred bytes per image. Error
rows are not: they stream to the errors files as they arise (transforms/write/error_sink.py).
"""

import contextlib
import functools
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from tfrecord_pipeline.config.conversion import Conversion
from tfrecord_pipeline.config.runner_choice import local_processes
from tfrecord_pipeline.dataset.commit import CommitInputs, commit_dataset
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.dataset.previous import previous_version
from tfrecord_pipeline.dataset.publish import Target
from tfrecord_pipeline.runners import refresh, refresh_files
from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.manifest.rows import (
    DroppedNegative,
    ManifestRow,
    ReadConfig,
    SkippedFile,
)
from tfrecord_pipeline.transforms.manifest.sources import ManifestFile, read_all
from tfrecord_pipeline.transforms.plan.dataset import (
    DatasetPlan,
    PlanAccumulator,
    PlanConfig,
    decide_plan,
)
from tfrecord_pipeline.transforms.plan.dedup import content_digest, keep_first
from tfrecord_pipeline.transforms.plan.grouping import all_shards, group_by_shard, in_pieces
from tfrecord_pipeline.transforms.plan.sharding import ShardId, pieces_for_cores
from tfrecord_pipeline.transforms.progress import UNWATCHED, Progress, Watch
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write import error_files
from tfrecord_pipeline.transforms.write.error_sink import ErrorSink
from tfrecord_pipeline.transforms.write.shard_pieces import join_pieces, joinable
from tfrecord_pipeline.transforms.write.shard_processes import (
    ShardPool,
    ShardTask,
    ShardWriter,
    shard_task,
    writers_at_once,
)
from tfrecord_pipeline.transforms.write.shard_writer import (
    IN_FLIGHT_PER_THREAD,
    ShardResult,
    WriteConfig,
    ordered_map,
)
from tfrecord_pipeline.transforms.write.threads import REMOTE_THREADS_PER_CORE, available_cores


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
    rows, skipped, negatives = read_rows(manifests, read_config, errors)
    inherited = previous.labels() if previous else None
    plan = _plan(rows, conversion.plan_config(inherited, read_config.detection))
    progress.planned(plan.row_count)
    if options.dedup:  # after the plan, which counts every row, so rows = records + errors
        rows = drop_duplicate_content(rows, options.max_file_bytes, errors)
    update = None
    if options.incremental and refresh.refreshable(previous, options.recorded()):
        update = refresh.refresh_here(plan, rows, previous, processes)
        plan, rows = update.layout.plan, update.to_convert
    write_plan = update.layout.write_plan if update else plan
    by_shard = group_by_shard(rows, write_plan, errors.add)
    del rows  # the shards' lists hold them now
    tasks, writers = write_tasks(by_shard, write_plan, config, processes if pool else 1)
    if pool and writers > 1:
        written = pool.write(tasks, progress)
    else:
        written = write_in_process(tasks, progress)
    results = list(join_pieces(errors.passed(written), config.staging, config.compress))
    if update:
        results = refresh_files.finish_here(update, previous, target.staging, progress, results)
    files, tally = errors.finish(error_files.ROWS_PER_ERRORS_FILE)
    counts = update.layout.counts if update else None
    return CommitInputs(plan, results, files, tally, len(skipped), len(negatives), counts)


def write_tasks(
    by_shard: dict[ShardId, list[ManifestRow]],
    plan: DatasetPlan,
    config: WriteConfig,
    processes: int,
) -> tuple[list[ShardTask], int]:
    """Every planned shard's task, or its pieces' when it is over its share of the rows of
    `processes` (`pieces_for_cores`) or `--num_shards` makes it large (as on Beam), each with
    the threads of its writer; and how many are written at once."""
    total = sum(map(len, by_shard.values()))
    parts = []
    for shard in all_shards(plan):
        rows = by_shard.pop(shard, [])
        pieces = max(plan.pieces_of(shard.split), pieces_for_cores(len(rows), total, processes))
        parts += [(shard, *part) for part in in_pieces(rows, pieces if joinable(config) else 1)]
    first = next((rows for _, _, rows in parts if rows), [])
    writers = writers_at_once(config, first, len(parts))
    tasks = [shard_task(shard, rows, plan, config, writers, piece) for shard, piece, rows in parts]
    return tasks, writers


def write_in_process(
    tasks: list[ShardTask], progress: Progress
) -> Iterator[ErrorRow | ShardResult]:
    writer = ShardWriter()
    try:
        for task in tasks:
            yield from writer.write(task, progress)
    finally:
        writer.close()


def read_rows(
    manifests: list[ManifestFile], config: ReadConfig, errors: ErrorSink
) -> tuple[list[ManifestRow], list[SkippedFile], list[DroppedNegative]]:
    """Every manifest's rows, the files a folder tree skipped and the negatives
    --drop_negatives left out; the records that are errors go to `errors`. Each manifest is
    read whole here, by the rules its pieces are read by on Beam."""
    kinds = (ManifestRow, SkippedFile, DroppedNegative)
    found: dict[type, list] = {kind: [] for kind in kinds}
    for manifest in manifests:
        for item in errors.passed(read_all(manifest, config)):
            found[type(item)].append(item)
    return tuple(found[kind] for kind in kinds)


def _plan(rows: list[ManifestRow], config: PlanConfig) -> DatasetPlan:
    accumulator = PlanAccumulator(config.counts)
    for row in rows:
        accumulator.add(row)
    return decide_plan(accumulator.stats(), config)


def drop_duplicate_content(
    rows: list[ManifestRow], max_file_bytes: int, errors: ErrorSink
) -> list[ManifestRow]:
    """The rows left once those whose image bytes repeat an earlier row's went to `errors` as
    error rows. The files are read and
    hashed on threads (file reads and SHA-256 release the GIL): many per core for `gs://`."""
    remote = any(fileio.is_remote(row.image_uri) for row in rows[:1])
    threads = available_cores() * (REMOTE_THREADS_PER_CORE if remote else 1)
    by_digest: dict[str, list[ManifestRow]] = defaultdict(list)
    digest_of = functools.partial(content_digest, max_file_bytes=max_file_bytes)
    with ThreadPoolExecutor(threads, "digest") as pool:
        # A window of futures, not Executor.map's one a row submitted at once (~1 KB each).
        digests = ordered_map(pool, digest_of, rows, threads * IN_FLIGHT_PER_THREAD)
        for digest, row in zip(digests, rows, strict=True):
            by_digest[digest].append(row)
    return [row for group in by_digest.values() for row in errors.passed(keep_first(group))]
