"""Writing whole shards in child processes, so a local run uses every core.

A pass-through shard writer is Python work under the GIL: threads cannot spread it over cores.
Beam's multi-process DirectRunner can, but each of its workers imports Beam (seconds) and
every row crosses gRPC. Instead the write step hands whole shards to child processes: a shard's
rows go in, its error rows and ShardResult come back; image bytes never cross a process
boundary.

A child is a fork of this process when no other thread runs here (the local runner, before its
progress bar starts, counting native threads too: `only_thread`): it has every module loaded and
takes a shard at once. Otherwise (Beam's threads, a notebook's, libvips' or TensorFlow's thread
pools once loaded) a fork could copy a lock another thread holds, so the
child is a fresh `python -m` interpreter importing only the writer — rather than
multiprocessing's spawn or forkserver, which re-import the caller's `__main__` in every child.

The protocol is one pickle per message over two pipes: a `ShardTask` in, then
`("ok", [ErrorRow..., ShardResult])` or `("raised", exception, traceback text)` out.
"""

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from transforms import fileio
from transforms.errors import ErrorRow, FaultError
from transforms.heap import keep_freed_memory
from transforms.images import decodes_every_image, pixels
from transforms.labels import LabelMap
from transforms.manifest import ManifestRow
from transforms.plan import DatasetPlan
from transforms.shard_writer import (
    ShardResult,
    WriteConfig,
    available_cores,
    process_cores,
    write_shard,
    writer_threads,
)
from transforms.sharding import WHOLE, Piece, ShardId

_PROTOCOL = pickle.HIGHEST_PROTOCOL


class ShardTask(NamedTuple):
    shard: ShardId
    rows: list[ManifestRow]
    labels: LabelMap
    config: WriteConfig
    threads: int  # image threads of this shard's writer
    writers: int = 1  # shards written at once with this one; over 1, a child may take it
    piece: Piece = WHOLE  # the part of the shard these rows are (Beam: large shards in pieces)


def run_task(task: ShardTask, pool: ThreadPoolExecutor | None = None) -> Iterator:
    """The shard writer's outputs for `task` (error rows, then the ShardResult), its images
    handled on `pool`, which must hold `task.threads` threads when there are several."""
    # From the first shard on: set while the manifests are read, it would keep their freed
    # buffers resident too.
    keep_freed_memory()
    return write_shard(
        task.shard, task.rows, task.labels, task.config, pool, task.threads, task.piece
    )


def _run_alone(task: ShardTask) -> list[ErrorRow | ShardResult]:
    """A child's run of one task, with a thread pool of its own when the task wants one."""
    if task.threads == 1:
        return list(run_task(task))
    with ThreadPoolExecutor(task.threads, "image") as pool:
        return list(run_task(task, pool))


class ShardWriters:
    """One worker's shard writers: its thread pools, and on a local run with cores to spare,
    child processes that write shards beside it.

    `task` decides how a shard is written; `write` writes tasks, those that children may take
    (`writers` > 1) largest first over this process and the children at once, the others here.
    """

    def __init__(self, config: WriteConfig):
        self._config = config
        self._thread_pools: dict[int, ThreadPoolExecutor] = {}
        self._children: list[ShardProcess] = []

    def task(
        self, shard: ShardId, rows: list[ManifestRow], plan: DatasetPlan, piece: Piece = WHOLE
    ) -> ShardTask:
        """The shard's (or its piece's) work, with the threads it gets: its share of this
        process's cores, or threads to wait on the network when its images are remote."""
        remote = bool(rows) and fileio.is_remote(rows[0].image_uri)
        writers = self._writers(rows, plan)
        cores = process_cores(self._config.sdk_processes, available_cores())
        threads = writer_threads(self._config, remote, max(1, cores // writers))
        return ShardTask(shard, rows, plan.labels, self._config, threads, writers, piece)

    def _writers(self, rows: list[ManifestRow], plan: DatasetPlan) -> int:
        """Shards written at once: one per process (never more than shards) for local paths;
        1 for `gs://` work, which waits on the network, where this process's threads serve (a
        child would import Beam and authenticate all over again)."""
        paths = [self._config.output, *(row.image_uri for row in rows[:1])]
        if any(map(fileio.is_remote, paths)):
            return 1
        return max(1, min(self._config.processes, sum(count for _, count in plan.shards)))

    def start_children(self, writers: int, fork: bool = False) -> None:
        """Children for `writers` writers at once: forks of this process if `fork` (only when
        no other thread runs here), else fresh interpreters, started ahead so they import the
        writer meanwhile."""
        if fork and decodes_every_image(self._config.image):
            pixels()  # loaded once here and shared, rather than by every fork
        while len(self._children) < writers - 1:
            self._children.append(ShardProcess(fork))

    def write(self, tasks: Iterable[ShardTask]) -> Iterator[ErrorRow | ShardResult]:
        """The outputs of every task: error rows, then its ShardResult, task by task."""
        tasks = list(tasks)
        shared = [task for task in tasks if task.writers > 1]
        if shared:
            self.start_children(max(task.writers for task in shared))
            yield from write_shards(shared, self._children, self.write_here)
        for task in tasks:
            if task.writers == 1:
                yield from self.write_here(task)

    def write_here(self, task: ShardTask) -> Iterator[ErrorRow | ShardResult]:
        return run_task(task, self._thread_pool(task.threads))

    def _thread_pool(self, threads: int) -> ThreadPoolExecutor | None:
        """A pool of `threads`, made once and kept for every shard."""
        if threads == 1:
            return None
        if threads not in self._thread_pools:
            self._thread_pools[threads] = ThreadPoolExecutor(threads, "image")
        return self._thread_pools[threads]

    def close(self) -> None:
        for pool in self._thread_pools.values():
            pool.shutdown()
        for child in self._children:
            child.close()


def only_thread() -> bool:
    """Whether this process runs a single thread, native ones included: a library's thread
    pool (libvips', TensorFlow's) is invisible to `threading`, and a fork beside it can copy
    one of its locks held, leaving the child waiting on it for ever."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no procfs: Python's own threads are all that can be counted
        return threading.active_count() == 1


class ShardProcess:
    """One child process that writes one shard at a time: a fork of this process, or a fresh
    interpreter running this module."""

    def __init__(self, fork: bool = False):
        if fork:
            self._child = _ForkedChild()
        else:
            self._child = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},  # our imports
            )
        self._pipe_ends = {self._child.stdin.fileno(), self._child.stdout.fileno()}
        _parent_ends.update(self._pipe_ends)

    def write(self, task: ShardTask) -> list[ErrorRow | ShardResult]:
        """Runs `task` in the child; its exception is raised here, with the child's traceback,
        and its death as a FaultError."""
        try:
            pickle.dump(task, self._child.stdin, _PROTOCOL)
            self._child.stdin.flush()
            reply = pickle.load(self._child.stdout)
        except (BrokenPipeError, EOFError):
            raise FaultError(_death(self._child.wait(), task)) from None
        if reply[0] == "ok":
            return reply[1]
        _, error, child_traceback = reply
        error.add_note(f"in the shard writer process:\n{child_traceback}")
        raise error

    def close(self) -> int:
        """Ends the child's input and returns its exit code (-9 if it had to be killed)."""
        _parent_ends.difference_update(self._pipe_ends)
        with contextlib.suppress(BrokenPipeError):  # the child died already
            self._child.stdin.close()  # the end of its input: it exits
        self._child.stdout.close()
        try:
            return self._child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._child.kill()
            return self._child.wait()


def _death(code: int, task: ShardTask) -> str:
    """The line that reports a child's death: how it ended, the shard, and what to do."""
    how = f"killed by {_signal_name(-code)}" if code < 0 else f"exited with code {code}"
    return (
        f"a shard writer process {how} while writing {task.shard.file_name(task.config.compress)}"
        "; rerun the same command (if the system killed it for memory, with fewer --processes)"
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal has no name of its own
        return f"signal {number}"


# This process's ends of every child's pipes. A forked child closes them all but its own: a
# copy of a sibling's input kept open would keep that sibling from ever seeing its end.
_parent_ends: set[int] = set()


class _ForkedChild:
    """A fork of this process serving tasks from one pipe and replying on another, with the
    part of `subprocess.Popen`'s interface ShardProcess uses (stdin, stdout, wait, kill)."""

    def __init__(self):
        task_read, task_write = os.pipe()
        reply_read, reply_write = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # else the child holds a copy of their buffers
            stream.flush()
        self.returncode: int | None = None
        self.pid = os.fork()
        if self.pid == 0:
            _serve_forked(task_read, reply_write, (task_write, reply_read, *_parent_ends))
        os.close(task_read)
        os.close(reply_write)
        self.stdin = open(task_write, "wb")  # noqa: SIM115 - closed by ShardProcess.close
        self.stdout = open(reply_read, "rb")  # noqa: SIM115

    def wait(self, timeout: float | None = None) -> int:
        """The child's exit code, once it has exited (as Popen's, asked again it is kept)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"shard writer {self.pid}", timeout)
            else:
                time.sleep(0.002)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


def _serve_forked(requests: int, replies: int, inherited: Iterable[int]) -> None:
    """The forked child's whole life: it never returns into the code that forked it."""
    code = 1
    try:
        for fd in inherited:
            os.close(fd)
        _serve(open(requests, "rb"), open(replies, "wb"))  # noqa: SIM115 - it exits below
        code = 0
    except KeyboardInterrupt:
        pass  # the parent reports the interruption
    except BaseException:  # noqa: BLE001 - reported, then the child exits
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def write_shards(
    tasks: list[ShardTask],
    children: list[ShardProcess],
    write_here: Callable[[ShardTask], Iterable[ErrorRow | ShardResult]],
) -> Iterator[ErrorRow | ShardResult]:
    """Writes every task, largest first, with `write_here` in this process and on each child
    at once, each taking the next task as it frees up; yields the outputs of every shard.

    Largest first keeps the last shard to finish short. A failure anywhere empties the queue,
    so the other writers stop after their current shard, and is raised here.
    """
    todo = deque(sorted(tasks, key=lambda task: -len(task.rows)))

    def serve(child: ShardProcess) -> list[ErrorRow | ShardResult]:
        outputs = []
        try:
            while (task := _take(todo)) is not None:
                outputs += child.write(task)
        except BaseException:
            todo.clear()
            raise
        return outputs

    with ThreadPoolExecutor(max(1, len(children)), "shard-process") as threads:
        served = [threads.submit(serve, child) for child in children]  # threads wait on pipes
        try:
            while (task := _take(todo)) is not None:
                yield from write_here(task)
        finally:
            todo.clear()  # on a failure here, or when the caller stops early
        for outputs in served:
            yield from outputs.result()


def _take(todo: deque) -> ShardTask | None:
    """The next task, or None; safe while other threads take from `todo` too."""
    try:
        return todo.popleft()
    except IndexError:
        return None


PARENT_CHECK_S = 0.2


def _exit_with_parent() -> None:
    """End this child soon after its parent dies, however the parent died (SIGKILL, the OOM
    killer): an orphan would go on writing a shard nobody will commit. The kernel's parent-death
    signal would fire when the parent's starting thread ends, not the parent, so a thread of the
    child watches for its adoption instead."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _serve(requests, replies) -> None:
    """The child's loop: a task in, its outputs (or the exception it raised) out, until EOF."""
    _exit_with_parent()
    while True:
        try:
            task = pickle.load(requests)
        except EOFError:
            return
        try:
            reply = pickle.dumps(("ok", _run_alone(task)), _PROTOCOL)
        except Exception as error:  # noqa: BLE001 - it is raised again in the parent
            reply = _pickled_failure(error, traceback.format_exc())
        replies.write(reply)
        replies.flush()


def _pickled_failure(error: Exception, child_traceback: str) -> bytes:
    try:
        return pickle.dumps(("raised", error, child_traceback), _PROTOCOL)
    except Exception:  # noqa: BLE001 - some client libraries' exceptions do not pickle
        return pickle.dumps(("raised", RuntimeError(repr(error)), child_traceback), _PROTOCOL)


if __name__ == "__main__":
    # Replies own the real stdout; anything a library prints goes to stderr instead.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _serve(sys.stdin.buffer, replies)
    # Every reply is flushed and every shard file closed: skip the interpreter's teardown of
    # the image libraries, which the parent's close() would wait for.
    sys.stderr.flush()
    os._exit(0)
