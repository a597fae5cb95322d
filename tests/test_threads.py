"""transforms/write/threads.py: how many image threads a shard writer runs."""

from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig
from tfrecord_pipeline.transforms.write.threads import (
    REMOTE_THREADS_PER_CORE,
    process_cores,
    writer_threads,
)


def test_writer_threads_follow_where_the_time_goes():
    local = WriteConfig("out")
    assert writer_threads(local, remote=False, cores=4) == 1  # pass-through: GIL-bound glue
    for image in (
        ImageConfig(validate="full"),
        ImageConfig(resize_short_side=256),
        ImageConfig(max_side=512),
        ImageConfig(encoding="raw"),
    ):
        assert writer_threads(local._replace(image=image), remote=False, cores=4) == 4
    assert writer_threads(local, remote=True, cores=4) == 4 * REMOTE_THREADS_PER_CORE
    assert writer_threads(local._replace(threads=3), remote=True, cores=4) == 3


def test_worker_processes_size_their_threads_from_their_share_of_the_machine():
    """On a 4-core Dataflow worker, one SDK process per core: 8 threads each, 32 in all, not
    the 4 x 32 that sizing each process from the machine's cores gave."""
    remote = WriteConfig("out")
    per_process = {n: writer_threads(remote, True, process_cores(n, 4)) for n in (0, 1, 2, 8)}
    assert per_process == {0: 8, 1: 32, 2: 16, 8: 8}  # 0: one process per core
