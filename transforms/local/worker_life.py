"""A shard-writer process's life: it ends with its parent, what it writes is known to its
parent, and how it ended is told in words (transforms/local/pool.py)."""

import ctypes
import os
import signal
import threading
import time

PARENT_CHECK_S = 0.2


def exit_with_parent() -> None:
    """End this worker soon after its parent (this process, or the forkserver, which ends with
    it) dies however it died (SIGKILL, the OOM killer): an orphan would go on writing a shard
    nobody will commit. The kernel's parent-death signal would fire when the parent's forking
    thread ends, not the parent, so a thread of the worker watches for its adoption instead."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def how_it_ended(code: int) -> str:
    """How a process with exit status `code` ended."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:  # a real-time signal has no name of its own
        return f"killed by signal {-code}"


# A shard file's name as a worker's slot holds it: longer ones (never made: split names are
# limited) are cut, which only shortens the line that names the shard of a dead worker.
NAME_BYTES = 256


class WorkersShards:
    """Which shard each worker of a pool is writing, in memory the processes share: a slot per
    worker (its pid, the shard's file name), overwritten as it takes a shard, read only when one
    dies. Nothing accumulates, so a run of any number of shards writes no more than this: a
    queue of (pid, shard) read only after a death filled its pipe after ~1,150 shards and
    blocked every worker for ever."""

    def __init__(self, context, workers: int):
        self._workers = workers
        self._taken = context.Value(ctypes.c_int, 0)  # slots taken, under its lock
        self._pids = context.Array(ctypes.c_long, workers, lock=False)
        self._names = context.Array(ctypes.c_char, workers * NAME_BYTES, lock=False)
        self._slot = -1  # this worker's slot, in a worker, once it took one

    def take_slot(self) -> int:
        """In a new worker: take the next free slot, and return it (-1 when more workers
        started than the pool was made for: their shards go unnamed)."""
        with self._taken.get_lock():
            slot, self._taken.value = self._taken.value, self._taken.value + 1
        if slot < self._workers:
            self._slot, self._pids[slot] = slot, os.getpid()
        return self._slot

    def writing(self, name: str) -> None:
        """In a worker: it now writes the shard file `name`."""
        if self._slot >= 0:
            start = self._slot * NAME_BYTES
            self._names[start : start + NAME_BYTES] = name.encode()[:NAME_BYTES].ljust(
                NAME_BYTES, b"\0"
            )

    def shard_of(self, pid: int) -> str | None:
        """The shard the worker `pid` was last writing, if it took one."""
        for slot in range(min(self._taken.value, self._workers)):
            if self._pids[slot] == pid:
                name = self._names[slot * NAME_BYTES : (slot + 1) * NAME_BYTES].rstrip(b"\0")
                return name.decode(errors="replace") or None
        return None
