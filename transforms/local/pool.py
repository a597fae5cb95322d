"""Writing shards on the local runner, in a process pool.

A pass-through shard writer is Python work under the GIL: threads cannot spread it over cores.
So the local runner hands shards (or pieces) to a `concurrent.futures` process pool: their rows
go in, a ShardResult comes back with its error rows (spilled into staging when many:
transforms/local/error_sink.py); image bytes never cross a process boundary. Each process
writes its tasks with a ShardWriter (transforms/write/tasks.py), as a Beam worker does. How
workers start: `fork_workers`."""

import gc
import multiprocessing
import signal
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from tfrecord_pipeline.transforms.errors import FaultError
from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.image.images import preload
from tfrecord_pipeline.transforms.local.error_sink import ErrorSink, SpilledErrors
from tfrecord_pipeline.transforms.local.row_buckets import release
from tfrecord_pipeline.transforms.local.tail import Claims, Share, numbered, share_end
from tfrecord_pipeline.transforms.local.worker_life import (
    WorkersShards,
    exit_with_parent,
    how_it_ended,
)
from tfrecord_pipeline.transforms.progress import SILENT, Progress
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult
from tfrecord_pipeline.transforms.write.tasks import ShardTask, ShardWriter

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
        self._shards, self._claims = WorkersShards(context, processes), Claims(context, processes)
        deaf = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        self._pool = ProcessPoolExecutor(
            processes,
            context,
            initializer=_start_worker,
            initargs=(self._shards, self._claims, deaf),
        )
        if fork:  # a fork pool makes every worker at its first task: now, before any thread
            self._pool.submit(int)
            self._workers.update(set(multiprocessing.active_children()) - self._others)

    def write(
        self, tasks: Iterable[ShardTask], progress: Progress = SILENT
    ) -> Iterator[SpilledErrors | ShardResult]:
        """Every task's outputs (its error rows, for an ErrorSink to adopt, then its result) as
        it ends, rows counted to `progress`. Tasks are taken in order, one a process and one
        waiting (only theirs are held here), and the last shared out (transforms/local/tail.py);
        a failure, raised here, cancels the others."""
        running: dict[Future, ShardTask] = {}
        try:
            for number, task in enumerate(tasks):
                self._submit(running, numbered(task, number), progress)
                if len(running) > self._processes:
                    yield from self._ended(running)
            while running:
                shares, patience = share_end(self._claims, running, self._processes)
                for share in shares:
                    self._submit(running, share, progress)
                yield from self._ended(running, patience)
        except BrokenProcessPool:
            raise FaultError(self._death()) from None
        finally:
            for future in running:
                future.cancel()

    def _submit(self, running: dict[Future, ShardTask], task: ShardTask, progress) -> None:
        running[self._pool.submit(_write_alone, task, progress)] = task
        self._workers.update(set(multiprocessing.active_children()) - self._others)

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
    def _ended(
        running: dict, timeout: float | None = None
    ) -> Iterator[SpilledErrors | ShardResult]:
        """The outputs of the tasks of `running` that ended first (or within `timeout`), taken
        out of it; their rows' spilled files deleted once no task running reads them."""
        done, _ = wait(running, timeout, FIRST_COMPLETED)
        for future in done:
            task = running.pop(future)
            if all(other.rows is not task.rows for other in running.values()):
                release(task.rows)
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
    errors, share = ErrorSink(task.config.staging), Share(task, _claims)
    try:
        results = list(errors.passed(_writer.write(task, progress, share.portion)))
        return [errors.spilled(), *share.pieces(results)]
    except Exception as error:
        if hasattr(error, "add_note"):  # Python 3.11; on 3.10 the pool's remote traceback only
            error.add_note(f"in the shard writer process:\n{traceback.format_exc()}")
        raise


_shards = None  # a worker's slot of ShardPool._shards
_claims = None  # and of its Claims
_writer = None  # a worker's ShardWriter, for every shard it writes


def _start_worker(shards: WorkersShards, claims: Claims, deaf: bool) -> None:
    """A worker dies of Ctrl-C, as this process's other children do (concurrent.futures would
    catch the KeyboardInterrupt and go on to the next shard), and with its parent; but not
    when the command ignores SIGINT (`deaf`: a shell script's background job), which a
    worker's default would not: it died, and the run with it."""
    global _shards, _claims, _writer
    # What the worker inherited (a fork: every module the command loaded) is kept out of the
    # collector's sight: its full collections would walk it all, and copy page after page of
    # memory the fork shares, to find no garbage.
    gc.freeze()
    _shards, _claims, _writer = shards, claims, ShardWriter()
    _claims.at(_shards.take_slot())
    signal.signal(signal.SIGINT, signal.SIG_IGN if deaf else signal.SIG_DFL)
    exit_with_parent()
