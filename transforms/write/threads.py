"""How many image threads a shard writer gets: the cores this process may use, its share of a
machine it shares with other worker processes, and whether threads pay for the work at hand;
on an object store, enough reads in flight to keep those cores busy through its latency.

Apart from the writer, which runs on the threads it is given: the runners size their own pools
by these too (the cores a local run counts, the threads a stat or digest pool gets on an object
store).
"""

import math
import os

from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.image.images import decodes_every_image
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig

REMOTE_THREADS_PER_CORE = 8  # stat and digest pools: requests that mostly wait on the network
# CPU per `gs://` image of a shard writer, in µs, its read included: the converter's whole
# process on one core, start-up cancelled out, images served at 0 ms latency; measured by
# benchmarks/reads_in_flight.py (results/reads-in-flight-*.json), ~30 KB JPEGs.
PASS_THROUGH_US = 500.0  # stored as it is: the default options (--validate full costs as much)
DECODING_US = 1150.0  # --image_encoding raw: every image decoded to pixels
HEADROOM = 1.25  # threads beyond the estimate: CPU per image and latency vary by image


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


def cpu_per_image_us(image: ImageConfig) -> float:
    """The CPU a `gs://` image costs a writer with these options, at the least: sized for the
    cheapest image its options allow, a writer has threads enough for any. A resize stores an
    image already within its size as it is, so only raw pixels cost more for every image."""
    return DECODING_US if image.encoding == "raw" else PASS_THROUGH_US


def reads_per_core(latency_ms: float, cpu_us: float) -> int:
    """The reads in flight that keep one core busy: while an image's CPU work runs (`cpu_us`),
    the others wait out the store's latency, so (latency + CPU) / CPU of them, with HEADROOM."""
    return math.ceil(HEADROOM * (latency_ms * 1000 + cpu_us) / cpu_us)


def writer_threads(config: WriteConfig, remote: bool, cores: int) -> int:
    """Image threads for one shard writer that has `cores` to itself: `--threads`, or when
    that is 0, what pays here.

    Threads pay where images wait or decode outside the GIL. Object-store reads wait on the
    store's latency (--read_latency_ms): a thread each per read in flight, enough of them to
    keep the cores busy (`reads_per_core`). Options that decode every image: a thread a core.
    A local pass-through conversion is Python glue under the GIL, where a second thread only
    contends for it, so it gets one (local runs spread shards over processes instead:
    local/pool.py).
    """
    if config.threads:
        return config.threads
    if remote:
        return cores * reads_per_core(config.read_latency_ms, cpu_per_image_us(config.image))
    return cores if decodes_every_image(config.image) else 1
