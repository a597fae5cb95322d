"""transforms/write/threads.py: how many image threads a shard writer runs, and
in_flight.images_in_flight: how many images they hold."""

import math

from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.write.in_flight import IN_FLIGHT_PER_THREAD, images_in_flight
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig
from tfrecord_pipeline.transforms.write.threads import (
    DECODING_US,
    PASS_THROUGH_US,
    cpu_per_image_us,
    process_cores,
    reads_per_core,
    writer_threads,
)

DECODING = (
    ImageConfig(validate="pixels"),
    ImageConfig(resize_short_side=256),
    ImageConfig(max_side=512),
    ImageConfig(encoding="raw"),
)


def test_writer_threads_follow_where_the_time_goes():
    local = WriteConfig("out")
    assert writer_threads(local, remote=False, cores=4) == 1  # pass-through: GIL-bound glue
    for image in DECODING:
        assert writer_threads(local._replace(image=image), remote=False, cores=4) == 4
    assert writer_threads(local, remote=True, cores=4) == 4 * reads_per_core(40, PASS_THROUGH_US)
    assert writer_threads(local._replace(threads=3), remote=True, cores=4) == 3


def test_reads_in_flight_cover_the_latency_while_one_image_s_cpu_work_runs():
    """(latency + CPU) / CPU reads keep a core busy; a quarter more for headroom."""
    assert reads_per_core(40, 1000) == math.ceil(1.25 * 41) == 52
    assert reads_per_core(40, 250) == math.ceil(1.25 * 161) == 202
    assert reads_per_core(0, 1000) == 2  # no latency: one read working, one waiting
    assert reads_per_core(80, 1000) > reads_per_core(40, 1000) > reads_per_core(40, 2000)


def test_the_cpu_per_image_is_the_measured_one_of_the_cheapest_image_the_options_allow():
    """Raw pixels decode every image; with any other options an image may be stored as it is
    (a resize keeps one already within its size)."""
    raw = ImageConfig(encoding="raw")
    assert cpu_per_image_us(raw) == DECODING_US > PASS_THROUGH_US
    assert {cpu_per_image_us(image) for image in DECODING if image != raw} == {PASS_THROUGH_US}
    assert cpu_per_image_us(ImageConfig()) == PASS_THROUGH_US


def test_remote_threads_follow_the_latency_given_and_the_options():
    remote = WriteConfig("out")
    by_latency = [
        writer_threads(remote._replace(read_latency_ms=ms), True, 2) for ms in (0, 10, 40, 100)
    ]
    assert by_latency == [2 * reads_per_core(ms, PASS_THROUGH_US) for ms in (0, 10, 40, 100)]
    assert by_latency == sorted(set(by_latency))
    decoding = remote._replace(image=ImageConfig(encoding="raw"))
    assert writer_threads(decoding, True, 2) == 2 * reads_per_core(40, DECODING_US)
    assert writer_threads(decoding, True, 2) < writer_threads(remote, True, 2)


def test_worker_processes_size_their_threads_from_their_share_of_the_machine():
    """On a 4-core Dataflow worker, one SDK process per core: one core's reads each, not
    four cores' reads in each of four processes."""
    remote = WriteConfig("out")
    per_core = reads_per_core(40, PASS_THROUGH_US)
    per_process = {n: writer_threads(remote, True, process_cores(n, 4)) for n in (0, 1, 2, 8)}
    assert per_process == {0: per_core, 1: 4 * per_core, 2: 2 * per_core, 8: per_core}


def test_images_held_a_thread_fall_as_threads_rise():
    """Eight a thread while threads are few (as before); then one more image a thread."""
    assert [images_in_flight(t) for t in (1, 2, 8)] == [8, 16, 64]
    per_thread = [images_in_flight(t) / t for t in (8, 16, 64, 200, 1000)]
    assert per_thread == sorted(per_thread, reverse=True) and per_thread[0] == IN_FLIGHT_PER_THREAD
    assert images_in_flight(200) == 264 and images_in_flight(201) == 265
