"""A shard writer's task, and the writer that runs tasks in this process: the Beam pipeline's
in its worker's process, the local runner's in each of its pool's processes
(transforms/local/pool.py) or, on one core, in its own."""

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.sharding import WHOLE, Piece, ShardId
from tfrecord_pipeline.transforms.progress import SILENT, Progress
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write import threads as thread_counts
from tfrecord_pipeline.transforms.write.heap import keep_freed_memory
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult, WriteConfig, write_shard

# Of a shard's items in record order, those one writer writes (write_shard's `portion`).
Portion = Callable[[Iterator], Iterator]


class ShardTask(NamedTuple):
    shard: ShardId
    rows: Iterable[ManifestRow]  # a list, or the local runner's bucket, read where it is written
    labels: LabelMap
    config: WriteConfig
    threads: int  # image threads of this shard's writer
    piece: Piece = WHOLE  # the part of the shard these rows are (Beam: large shards in pieces)
    number: int = -1  # its number in a pool's run, when it may be split (transforms/local/tail.py)
    first: int = 0  # the first of its items in record order it writes: a split's second piece

    def file_name(self) -> str:
        return self.shard.file_name(self.config.shard_format.suffix)


def shard_task(
    shard: ShardId,
    rows: Iterable[ManifestRow],
    plan: DatasetPlan,
    config: WriteConfig,
    writer_count: int = 1,
    piece: Piece = WHOLE,
    sample: list[ManifestRow] | None = None,
) -> ShardTask:
    """The shard's (or its piece's) work, with the threads its writer gets: its share of this
    process's cores among the `writer_count` writers writing at once, or threads to wait on the
    network when its images are remote, as those of `sample` (default: `rows`, a list) are."""
    first = (rows if sample is None else sample)[:1]
    remote = any(fileio.is_remote(row.image_uri) for row in first)
    cores = thread_counts.process_cores(config.sdk_processes, thread_counts.available_cores())
    threads = thread_counts.writer_threads(config, remote, max(1, cores // writer_count))
    return ShardTask(shard, rows, plan.labels, config, threads, piece)


def run_task(
    task: ShardTask,
    pool: ThreadPoolExecutor | None = None,
    progress: Progress = SILENT,
    portion: Portion | None = None,
) -> Iterator:
    """The shard writer's outputs for `task` (error rows, then the ShardResult), its images
    handled on `pool`, which must hold `task.threads` threads when there are several; its rows
    counted to `progress`; `portion`: write_shard's."""
    # From the first shard on: set while the manifests are read, it would keep their freed
    # buffers resident too.
    keep_freed_memory()
    return write_shard(
        task.shard,
        task.rows,
        task.labels,
        task.config,
        pool,
        task.threads,
        task.piece,
        progress,
        portion,
    )


class ShardWriter:
    """Writes shards in this process, each on a thread pool of its task's size, made once and
    kept for every shard (a Beam worker writes many)."""

    def __init__(self):
        self._thread_pools: dict[int, ThreadPoolExecutor] = {}

    def write(
        self, task: ShardTask, progress: Progress = SILENT, portion: Portion | None = None
    ) -> Iterator[ErrorRow | ShardResult]:
        if task.threads == 1:
            return run_task(task, None, progress, portion)
        if task.threads not in self._thread_pools:
            self._thread_pools[task.threads] = ThreadPoolExecutor(task.threads, "image")
        return run_task(task, self._thread_pools[task.threads], progress, portion)

    def close(self) -> None:
        for pool in self._thread_pools.values():
            pool.shutdown()
