"""Run a command and measure it as a whole: wall time with start-up, the CPU time of its process
tree, and peak memory of the tree (sampled from /proc every 50 ms, so every worker process it
starts counts)."""

import os
import resource
import subprocess
import threading
import time


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        try:
            threads = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for thread in threads:  # a child belongs to the thread that started it
            try:
                with open(f"/proc/{current}/task/{thread}/children") as handle:
                    queue += [int(child) for child in handle.read().split()]
            except OSError:
                pass
    return pids


def _cpu_s() -> float:
    """CPU seconds of this process's children that have ended, and of theirs they waited for."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_measured(command: list[str], env: dict | None = None) -> dict:
    """Seconds, CPU seconds of the tree (every process the command's waited for), peak summed
    RSS of the tree and peak RSS of its largest process (MB).

    The clock stops when the process exits (not at the next memory sample), so a run's time
    is exact however coarse the sampling."""
    peaks = {"sum": 0, "one": 0}
    cpu = _cpu_s()
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)

    def sample() -> None:
        while process.poll() is None:
            sizes = [_rss_kb(pid) for pid in _tree(process.pid)]
            peaks["sum"], peaks["one"] = max(peaks["sum"], sum(sizes)), max(peaks["one"], *sizes)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    error = process.stderr.read()  # drained while it runs: a chatty run never blocks on a pipe
    process.wait()
    seconds = time.monotonic() - start
    cpu = _cpu_s() - cpu
    sampler.join()
    if process.returncode:
        raise RuntimeError(f"{command[:3]} failed: {error.decode()[-2000:]}")
    return {
        "seconds": round(seconds, 3),
        "cpu_s": round(cpu, 3),
        "peak_rss_tree_mb": round(peaks["sum"] / 1024, 1),
        "peak_rss_process_mb": round(peaks["one"] / 1024, 1),
    }
