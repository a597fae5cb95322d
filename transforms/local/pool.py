"""Writing shards: in this process with its threads, or on the local runner in a process pool.

A pass-through shard writer is Python work under the GIL: threads cannot spread it over cores.
So the local runner hands shards (or pieces) to a `concurrent.futures` process pool: their rows
go in, a ShardResult comes back with its error rows (spilled into staging when many:
transforms/local/error_sink.py); image bytes never cross a process boundary. The Beam pipeline
writes in its worker's process (`ShardWriter`). How workers start: `fork_workers`."""

import gc
import multiprocessing
import signal
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import ErrorRow, FaultError
from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.image.images import preload
from tfrecord_pipeline.transforms.local.error_sink import ErrorSink, SpilledErrors
from tfrecord_pipeline.transforms.local.worker_life import (
    WorkersShards,
    exit_with_parent,
    how_it_ended,
)
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.sharding import WHOLE, Piece, ShardId
from tfrecord_pipeline.transforms.progress import SILENT, Progress
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write import threads as thread_counts
from tfrecord_pipeline.transforms.write.heap import keep_freed_memory
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult, WriteConfig, write_shard


class ShardTask(NamedTuple):
    shard: ShardId
    rows: Iterable[ManifestRow]  # a list, or the local runner's bucket, read where it is written
    labels: LabelMap
    config: WriteConfig
    threads: int  # image threads of this shard's writer
    piece: Piece = WHOLE  # the part of the shard these rows are (Beam: large shards in pieces)

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
    task: ShardTask, pool: ThreadPoolExecutor | None = None, progress: Progress = SILENT
) -> Iterator:
    """The shard writer's outputs for `task` (error rows, then the ShardResult), its images
    handled on `pool`, which must hold `task.threads` threads when there are several; its rows
    counted to `progress`."""
    # From the first shard on: set while the manifests are read, it would keep their freed
    # buffers resident too.
    keep_freed_memory()
    return write_shard(
        task.shard, task.rows, task.labels, task.config, pool, task.threads, task.piece, progress
    )


class ShardWriter:
    """Writes shards in this process, each on a thread pool of its task's size, made once and
    kept for every shard (a Beam worker writes many)."""

    def __init__(self):
        self._thread_pools: dict[int, ThreadPoolExecutor] = {}

    def write(
        self, task: ShardTask, progress: Progress = SILENT
    ) -> Iterator[ErrorRow | ShardResult]:
        if task.threads == 1:
            return run_task(task, progress=progress)
        if task.threads not in self._thread_pools:
            self._thread_pools[task.threads] = ThreadPoolExecutor(task.threads, "image")
        return run_task(task, self._thread_pools[task.threads], progress)

    def close(self) -> None:
        for pool in self._thread_pools.values():
            pool.shutdown()


_start_method = "forkserver"  # how a ShardPool's workers start, decided once: fork_workers


def fork_workers() -> None:
    """Make this process's shard writers forks of it, ready at once with every module loaded:
    for the command's process alone (its entry point calls this), which starts no thread before
    the local runner's pool. Any other (a notebook, a test beside its fixtures' threads) keeps
    the forkserver: a fork there could copy a lock another thread (libvips' pool) holds and wait
    on it for ever; the forkserver is a fresh interpreter that loads this module once."""
    global _start_method
    _start_method = "fork"


class ShardPool:
    """The local runner's `processes` shard-writer processes; a context manager that, left by
    an exception (Ctrl-C included), kills them: none writes on after this process has cleaned
    up its staging folder. `start_method` ("fork", "forkserver") overrides the process's."""

    def __init__(self, processes: int, image: ImageConfig, start_method: str = ""):
        self.start_method = start_method or _start_method
        self._processes = processes
        fork = self.start_method == "fork"
        if fork:  # loaded once here and shared, rather than by every fork
            preload(image)
        self._others, self._workers = set(multiprocessing.active_children()), set()  # its own
        context = multiprocessing.get_context(self.start_method)
        if not fork:
            context.set_forkserver_preload([__name__])
        self._shards = WorkersShards(context, processes)
        self._pool = ProcessPoolExecutor(
            processes,
            context,
            initializer=_start_worker,
            initargs=(self._shards, signal.getsignal(signal.SIGINT) == signal.SIG_IGN),
        )
        if fork:  # a fork pool makes every worker at its first task: now, before any thread
            self._pool.submit(int)
            self._workers.update(set(multiprocessing.active_children()) - self._others)

    def write(
        self, tasks: Iterable[ShardTask], progress: Progress = SILENT
    ) -> Iterator[SpilledErrors | ShardResult]:
        """Every task's outputs (its error rows, for an ErrorSink to adopt, then its result) as
        it ends, rows counted to `progress`. Tasks are taken in order, one a process and one
        waiting (only theirs are held here); a failure, raised here, cancels the others."""
        running: set = set()
        try:
            for task in tasks:
                running.add(self._pool.submit(_write_alone, task, progress))
                self._workers.update(set(multiprocessing.active_children()) - self._others)
                if len(running) > self._processes:
                    yield from self._ended(running)
            while running:
                yield from self._ended(running)
        except BrokenProcessPool:
            raise FaultError(self._death()) from None
        finally:
            for future in running:
                future.cancel()

    def spread(self, function: Callable, calls: list[tuple]) -> Iterator:
        """`function` called with each of `calls`' arguments on the processes, all submitted
        now; their results, in order, as what this returns is read: work of the run other than
        its shards' (reading a manifest's byte ranges, sorting rows into pieces)."""
        futures = [self._pool.submit(function, *arguments) for arguments in calls]
        self._workers.update(set(multiprocessing.active_children()) - self._others)
        return map(self._result, futures)

    def _result(self, future: Future):
        try:
            return future.result()
        except BrokenProcessPool:
            raise FaultError(self._death()) from None

    @staticmethod
    def _ended(running: set) -> Iterator[SpilledErrors | ShardResult]:
        """The outputs of the tasks of `running` that ended first, taken out of it."""
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        running -= done
        for future in done:
            yield from future.result()

    def _death(self) -> str:
        """The line that reports a worker's death: how it ended, its shard, and what to do."""
        # The pool names neither the dead worker nor its status; its reaped processes do.
        self._pool.shutdown()
        ended = {process.pid: process.exitcode for process in self._workers if process.exitcode}
        dead = [pid for pid, code in ended.items() if code != -signal.SIGTERM] or list(ended)
        how = how_it_ended(ended[dead[0]]) if dead else "ended"
        shard = self._shards.shard_of(dead[0]) if dead else None  # none: it died before taking one
        during = f" while writing {shard}" if shard else ""
        return (
            f"a shard writer process {how}{during}; rerun the same command (if the system"
            " killed it for memory, with fewer --processes)"
        )

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace) -> None:
        if error is None:
            self._pool.shutdown()
            return
        for process in self._workers:  # Python 3.14's ProcessPoolExecutor.kill_workers()
            process.kill()
        self._pool.shutdown(cancel_futures=True)


def _write_alone(task: ShardTask, progress: Progress) -> list[SpilledErrors | ShardResult]:
    """A worker's run of one task; an exception carries the worker's traceback here as a note."""
    _shards.writing(task.file_name())
    errors = ErrorSink(task.config.staging)
    try:
        results = list(errors.passed(_writer.write(task, progress)))
        return [errors.spilled(), *results]
    except Exception as error:
        if hasattr(error, "add_note"):  # Python 3.11; on 3.10 the pool's remote traceback only
            error.add_note(f"in the shard writer process:\n{traceback.format_exc()}")
        raise


_shards = None  # a worker's slot of ShardPool._shards
_writer = None  # a worker's ShardWriter, for every shard it writes


def _start_worker(shards: WorkersShards, deaf: bool) -> None:
    """A worker dies of Ctrl-C, as this process's other children do (concurrent.futures would
    catch the KeyboardInterrupt and go on to the next shard), and with its parent; but not
    when the command ignores SIGINT (`deaf`: a shell script's background job), which a
    worker's default would not: it died, and the run with it."""
    global _shards, _writer
    # What the worker inherited (a fork: every module the command loaded) is kept out of the
    # collector's sight: its full collections would walk it all, and copy page after page of
    # memory the fork shares, to find no garbage.
    gc.freeze()
    _shards, _writer = shards, ShardWriter()
    _shards.take_slot()
    signal.signal(signal.SIGINT, signal.SIG_IGN if deaf else signal.SIG_DFL)
    exit_with_parent()
