"""Shards written in the local runner's process pool: same bytes as in this process, failures
surface here."""

import gc
import json
import os
import platform
import signal
import subprocess
import sys

import pytest
from conftest import make_images, read_manifest, write_manifest

from tfrecord_pipeline.transforms.errors import ErrorRow, FaultError, Reason
from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.local.error_sink import SpilledErrors
from tfrecord_pipeline.transforms.local.pool import ShardPool
from tfrecord_pipeline.transforms.local.shards import writers_at_once
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.sharding import Piece, ShardId
from tfrecord_pipeline.transforms.progress import FolderProgress
from tfrecord_pipeline.transforms.write.formats import ShardFormat
from tfrecord_pipeline.transforms.write.heap import keep_freed_memory
from tfrecord_pipeline.transforms.write.shard_pieces import join_pieces
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult, WriteConfig
from tfrecord_pipeline.transforms.write.tasks import ShardTask, ShardWriter, shard_task
from tfrecord_pipeline.transforms.write.threads import (
    available_cores,
    cpu_per_image_us,
    reads_per_core,
)

RESIZE = ImageConfig(resize_short_side=32)  # decodes every image: threads matter here


@pytest.fixture
def rows(tmp_path):
    listed = make_images(tmp_path, per_class=3)
    listed.append({"image_uri": "images/missing.jpg", "label": "rocket"})
    manifest = write_manifest(tmp_path / "manifest.csv", listed)
    return list(read_manifest(str(manifest), 0, ReadConfig()))


def only_thread() -> bool:
    """Whether this process runs a single thread, native ones included (libvips' pool, once a
    test has resized here): the one place a fork pool can be made safely."""
    return len(os.listdir("/proc/self/task")) == 1


@pytest.fixture(params=["fork", "forkserver"])
def pool(request):
    """A pool of two workers, made either way the product makes them. Once an earlier test has
    resized in this process, libvips' idle pool threads are there, and a fork would wait for
    them for ever; `test_forks_in_a_process_running_one_thread` then runs the fork tests
    again in a fresh process, where they cannot be skipped."""
    if request.param == "fork" and not only_thread():
        pytest.skip("native threads run here: the fork tests run in a fresh process")
    with ShardPool(2, RESIZE, request.param) as made:
        assert made.start_method == request.param
        yield made


def _tasks(rows, output, shards=3, threads=1, image: ImageConfig | None = None):
    labels = LabelMap(tuple(sorted({row.label for row in rows})))
    config = WriteConfig(str(output), image or ImageConfig())
    return [
        ShardTask(ShardId("train", i, shards), rows[i::shards], labels, config, threads)
        for i in range(shards)
    ]


def _shard_files(output, outputs) -> dict[str, bytes]:
    """Each shard's bytes by its name, from the staged file its result names: the only files
    in `output` beside their rows files."""
    results = [o for o in outputs if isinstance(o, ShardResult)]
    staged = [name for r in results for name in (r.staged, f"{r.staged}.rows")]
    assert sorted(p.name for p in output.iterdir()) == sorted(staged)
    return {r.file: (output / r.staged).read_bytes() for r in results}


def _by_shard(outputs) -> list:
    """Outputs in shard order, each attempt's own staging name left out: the rest is the same
    anywhere."""
    results = sorted((o for o in outputs if isinstance(o, ShardResult)), key=lambda r: r.index)
    return [*sorted(_error_lines(outputs)), *(result._replace(staged="") for result in results)]


def _error_lines(outputs) -> list[str]:
    """The error rows among `outputs` as JSON lines: a worker sends them spilled (few, so as
    lines and no runs), this process's writer as rows."""
    rows = [o.to_json() for o in outputs if isinstance(o, ErrorRow)]
    spilled = [o for o in outputs if isinstance(o, SpilledErrors)]
    assert not any(s.runs for s in spilled)
    return rows + [line for s in spilled for _, line in s.lines]


def test_every_shard_is_written_once(rows, tmp_path, pool):
    written = list(pool.write(_tasks(rows, tmp_path / "out", shards=7)))
    results = sorted(o.index for o in written if isinstance(o, ShardResult))
    assert results == list(range(7))
    assert sum(o.records for o in written if isinstance(o, ShardResult)) == len(rows) - 1
    assert len(_shard_files(tmp_path / "out", written)) == 7


@pytest.mark.timeout(120)
def test_a_pool_writes_thousands_of_shards_and_still_names_a_dead_workers(rows, tmp_path, pool):
    """Nothing a worker sends its parent piles up unread: 3,000 shards (empty ones, so that
    only the pool's own traffic counts) end, and a worker killed after them is still named
    with its shard. A queue of the shards started, read only after a death, filled its pipe
    at ~1,150 shards and blocked every worker for ever."""
    (task,) = _tasks(rows[:0], tmp_path / "out", shards=1)
    many = [task._replace(shard=ShardId("train", i, 3001)) for i in range(3000)]
    written = [o for o in pool.write(many) if isinstance(o, ShardResult)]
    assert sorted(result.index for result in written) == list(range(3000))
    fatal = task._replace(shard=ShardId("train", 3000, 3001), rows=[_Killed()])
    with pytest.raises(FaultError, match="while writing train-03000-of-03001.tfrecord; rerun"):
        list(pool.write([fatal]))


def test_tasks_are_taken_one_a_process_and_one_waiting(rows, tmp_path, pool):
    """The runner makes each task (its rows read back from disk) as the pool takes it: only
    the tasks written and one waiting are held at once."""
    taken = []

    def tasks():
        for task in _tasks(rows, tmp_path / "out", shards=6):
            taken.append(task)
            yield task

    written = pool.write(tasks())
    first = next(written)  # the first output of the first task to end
    assert len(taken) <= 3
    assert sum(isinstance(o, ShardResult) for o in [first, *written]) == 6
    assert len(taken) == 6


def test_the_workers_report_every_row_to_the_observer(rows, tmp_path, pool):
    (tmp_path / "progress").mkdir()
    progress = FolderProgress(str(tmp_path / "progress"))
    list(pool.write(_tasks(rows, tmp_path / "out", shards=3), progress))
    assert progress.counts() == (len(rows), None)  # the missing file's error row included


def test_a_workers_exception_is_raised_here_with_its_traceback(rows, tmp_path, pool):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(OSError) as raised:
        list(pool.write(_tasks(rows, blocked, shards=1)))
    assert "in the shard writer process" in "".join(raised.value.__notes__)
    assert list(pool.write(_tasks(rows, tmp_path / "out", shards=1)))  # the pool lives on


class _Killed:
    """A row whose first use kills the worker using it, as the OOM killer would."""

    def __getattr__(self, name):
        if not name.startswith("__"):  # not pickle's questions
            os.kill(os.getpid(), signal.SIGKILL)
        raise AttributeError(name)


class _Exits:
    """A row whose first use ends the worker using it, as a library's exit() would."""

    def __getattr__(self, name):
        if not name.startswith("__"):
            os._exit(3)
        raise AttributeError(name)


@pytest.mark.parametrize(
    "row, how", [(_Killed(), "killed by SIGKILL"), (_Exits(), "exited with code 3")]
)
def test_a_worker_that_dies_is_a_fault_with_how_and_its_shard(rows, tmp_path, pool, row, how):
    (task,) = _tasks(rows, tmp_path / "out", shards=1)
    fatal = task._replace(shard=ShardId("train", 2, 3), rows=[row])
    with pytest.raises(FaultError) as raised:
        list(pool.write([task, fatal]))
    assert str(raised.value).startswith(
        f"a shard writer process {how} while writing train-00002-of-00003.tfrecord; rerun the"
        " same command"
    )


def test_a_failure_cancels_the_shards_not_started(rows, tmp_path):
    """One worker: the failing shard (the largest, so the first) and at most the one queued
    behind it run; the others never start."""
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    (failing,) = _tasks(rows, blocked, shards=1)
    others = _tasks(rows[:4], tmp_path / "out", shards=4)
    with pytest.raises(OSError), ShardPool(1, ImageConfig()) as pool:
        list(pool.write([failing, *others]))
    assert len(list((tmp_path / "out").glob("train-*.rows"))) < 4


def test_the_pool_writes_the_same_bytes_and_rows_as_this_process(rows, tmp_path, pool):
    """The pool made first: resizing here starts libvips' threads, so this test comes after
    the other fork tests."""
    writer = ShardWriter()
    try:
        ours = [
            o for task in _tasks(rows, tmp_path / "here", image=RESIZE) for o in writer.write(task)
        ]
    finally:
        writer.close()
    theirs = list(pool.write(_tasks(rows, tmp_path / "there", threads=2, image=RESIZE)))
    assert _by_shard(ours) == _by_shard(theirs)
    assert _shard_files(tmp_path / "here", ours) == _shard_files(tmp_path / "there", theirs)
    errors = [json.loads(line) for line in _error_lines(theirs)]
    assert [e["reason"] for e in errors] == [Reason.MISSING_FILE]


def test_a_free_worker_takes_over_the_end_of_a_shard_and_the_pieces_join_to_its_bytes(
    rows, tmp_path, pool
):
    """One task of a row beside one of 1,200 (resized: a few seconds of work): the worker that
    ends the small one writes the second half of what the other has left, and the two pieces
    joined are the large shard written whole, its rows file and its duplicate-key errors
    too."""
    copies = [
        row._replace(key=f"key {copy % 1150}", position=copy)
        for copy, row in enumerate(rows[:-1] * 100)
    ][:1200]
    large, small = _tasks(copies, tmp_path / "there", shards=1, image=RESIZE) * 2
    small = small._replace(shard=ShardId("train", 1, 2), rows=copies[:1])
    large = large._replace(shard=ShardId("train", 0, 2))
    written = list(pool.write([small, large]))
    pieces = sorted(
        (o for o in written if isinstance(o, ShardResult) and o.index == 0),
        key=lambda result: result.piece,
    )
    assert [piece.piece for piece in pieces] == [Piece(0, 2), Piece(1, 2)]
    assert 0 < pieces[0].records < 1150 and pieces[0].records + pieces[1].records == 1150
    (joined,) = join_pieces(iter(pieces), str(tmp_path / "there"), ShardFormat())
    writer = ShardWriter()
    try:
        ours = [
            o
            for o in writer.write(
                large._replace(config=large.config._replace(staging=str(tmp_path / "here")))
            )
            if isinstance(o, ShardResult)
        ]
    finally:
        writer.close()
    (whole,) = ours
    assert joined._replace(staged="") == whole._replace(staged="")
    for suffix in ["", ".rows"]:
        assert (tmp_path / "there" / f"{joined.staged}{suffix}").read_bytes() == (
            tmp_path / "here" / f"{whole.staged}{suffix}"
        ).read_bytes()
    assert len(_error_lines(written)) == 50  # the repeated keys, on either side of the split


def test_shard_tasks_share_the_cores_and_remote_work_stays_here(rows):
    plan = DatasetPlan(LabelMap(("coffee", "rocket")), (("train", 8),), (("train", 4),))
    local = WriteConfig("out", RESIZE, processes=3)
    assert writers_at_once(local, rows, 4) == 3
    assert writers_at_once(local._replace(processes=8), rows, 4) == 4  # never more than tasks
    assert writers_at_once(local._replace(staging="gs://bucket/out"), rows, 4) == 1
    cores = available_cores()
    assert shard_task(ShardId("train", 0, 4), rows, plan, local).threads == cores
    assert shard_task(ShardId("train", 0, 4), rows, plan, local, writer_count=cores).threads == 1
    remote = [rows[0]._replace(image="gs://bucket/a.jpg")]
    threads = shard_task(ShardId("train", 0, 4), remote, plan, local, writer_count=cores).threads
    assert threads == reads_per_core(local.read_latency_ms, cpu_per_image_us(RESIZE))


def test_a_worker_keeps_what_it_inherited_out_of_the_collector():
    # Frozen objects are the permanent generation's: a fork inherits the command's modules,
    # a forkserver worker its preloaded ones; a full collection walks none of them. The
    # forkserver's workers: a fork pool is made here only while this process runs one thread.
    with ShardPool(2, ImageConfig(), "forkserver") as made:
        assert all(list(made.spread(gc.get_freeze_count, [(), ()])))


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt thresholds are glibc's")
def test_shard_writer_processes_keep_freed_memory():
    assert keep_freed_memory() and keep_freed_memory()  # taken, and harmless to repeat


def test_forks_in_a_process_running_one_thread():
    if only_thread():
        pytest.skip("this process runs one thread: the fork tests ran here")
    # Without pytest-timeout's timer thread, which would make every fork test skip; this test
    # runs under the timeout of its own run.
    selected = [
        "-k",
        "fork and not running_one_thread",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:timeout",
    ]
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, *selected], capture_output=True, text=True
    )
    assert ran.returncode == 0 and " skipped" not in ran.stdout, ran.stdout + ran.stderr
