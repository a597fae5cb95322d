"""A shard-writer process's life: it ends with its parent, and how it ended is told in words
(transforms/write/shard_processes.py)."""

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
