"""How many image threads a shard writer gets: the cores this process may use, its share of a
machine it shares with other worker processes, and whether threads pay for the work at hand.

Apart from the writer, which runs on the threads it is given: the runners size their own pools
by these too (the cores a local run counts, the threads a stat or digest pool gets on an object
store).
"""

import os

from tfrecord_pipeline.transforms.image.images import decodes_every_image
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig

REMOTE_THREADS_PER_CORE = 8  # object-store reads mostly wait on the network


def available_cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def process_cores(sdk_processes: int, machine_cores: int) -> int:
    """The cores one of `sdk_processes` worker processes may count on, of the `machine_cores`
    they share (0 processes: one per core, so one core each). Each process sizes its writers'
    threads from its own share: sized from the machine's, N processes would start N times
    too many."""
    if sdk_processes == 0:
        return 1
    return max(1, machine_cores // sdk_processes)


def writer_threads(config: WriteConfig, remote: bool, cores: int) -> int:
    """Image threads for one shard writer that has `cores` to itself: `--threads`, or when
    that is 0, what pays here.

    Threads pay where images wait or decode outside the GIL: object-store reads, and options
    that decode every image. A local pass-through conversion is Python glue under the GIL,
    where a second thread only contends for it, so it gets one (local runs spread shards over
    processes instead: shard_processes.py).
    """
    if config.threads:
        return config.threads
    if remote:
        return cores * REMOTE_THREADS_PER_CORE
    return cores if decodes_every_image(config.image) else 1
