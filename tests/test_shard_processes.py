"""Shards written in child processes: same bytes as in-process, failures surface in the parent."""

import platform
import subprocess
import sys
import threading

import pytest
from conftest import make_images, read_manifest, write_manifest

from transforms.errors import FaultError, Reason
from transforms.heap import keep_freed_memory
from transforms.images import ImageConfig
from transforms.labels import LabelMap
from transforms.manifest import ReadConfig
from transforms.shard_processes import (
    ShardProcess,
    ShardTask,
    only_thread,
    run_task,
    write_shards,
)
from transforms.shard_writer import ErrorRow, ShardResult, WriteConfig
from transforms.sharding import ShardId


@pytest.fixture
def rows(tmp_path):
    listed = make_images(tmp_path, per_class=3)
    listed.append({"image_uri": "images/missing.jpg", "label": "rocket"})
    manifest = write_manifest(tmp_path / "manifest.csv", listed)
    return list(read_manifest(str(manifest), 0, ReadConfig()))


def _child(fork: bool) -> ShardProcess:
    """A fork only where the product would fork: in a process running one thread. Once an
    earlier test has resized in this process, libvips' idle pool threads are there, and a fork
    would wait for them for ever; `test_forks_in_a_process_running_one_thread` then runs the
    fork tests again in a fresh process, where they cannot be skipped."""
    if fork and not only_thread():
        pytest.skip("native threads run here: the fork tests run in a fresh process")
    return ShardProcess(fork)


@pytest.fixture(params=[False, True], ids=["interpreter", "fork"])
def child(request):
    process = _child(request.param)
    yield process
    process.close()


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
    results = [o for each in outputs for o in each if isinstance(o, ShardResult)]
    staged = [name for r in results for name in (r.staged, f"{r.staged}.rows")]
    assert sorted(p.name for p in output.iterdir()) == sorted(staged)
    return {r.file: (output / r.staged).read_bytes() for r in results}


def _named_apart(outputs) -> list:
    """Outputs with each attempt's own staging name left out: the rest is the same anywhere."""
    return [
        [o._replace(staged="") if isinstance(o, ShardResult) else o for o in each]
        for each in outputs
    ]


RESIZE = ImageConfig(resize_short_side=32)  # decodes every image: threads matter here


def _same_writes(rows, tmp_path, here, there) -> None:
    """`here` and `there` (a task's outputs from each) write the same bytes and error rows."""
    ours = [here(t) for t in _tasks(rows, tmp_path / "here", image=RESIZE)]
    theirs = [there(t) for t in _tasks(rows, tmp_path / "there", threads=2, image=RESIZE)]
    assert _named_apart(ours) == _named_apart(theirs)
    assert _shard_files(tmp_path / "here", ours) == _shard_files(tmp_path / "there", theirs)
    errors = [o for outputs in theirs for o in outputs if isinstance(o, ErrorRow)]
    assert [e.reason for e in errors] == [Reason.MISSING_FILE]


def test_a_fresh_interpreter_writes_the_same_bytes_and_rows_as_this_process(rows, tmp_path):
    child = ShardProcess(fork=False)
    try:
        _same_writes(rows, tmp_path, lambda task: list(run_task(task)), child.write)
    finally:
        child.close()


def test_a_fork_writes_the_same_bytes_and_rows_as_a_fresh_interpreter(rows, tmp_path):
    """Against a child, not this process: resizing here would start libvips' threads."""
    fork, fresh = _child(fork=True), ShardProcess(fork=False)
    try:
        _same_writes(rows, tmp_path, fresh.write, fork.write)
    finally:
        fork.close(), fresh.close()


@pytest.mark.parametrize("fork", [False, True], ids=["interpreter", "fork"])
def test_every_shard_is_written_once_between_this_process_and_children(rows, tmp_path, fork):
    children = [_child(fork) for _ in range(3)]
    try:
        tasks = _tasks(rows, tmp_path / "out", shards=7)
        written = list(write_shards(tasks, children, run_task))
    finally:
        # Each ends when its input does: a fork holding a copy of a sibling's input would
        # keep that sibling waiting until it was killed (-9).
        codes = [process.close() for process in children]
    assert codes == [0, 0, 0]
    results = sorted(o.index for o in written if isinstance(o, ShardResult))
    assert results == list(range(7))
    assert sum(o.records for o in written if isinstance(o, ShardResult)) == len(rows) - 1
    assert len(_shard_files(tmp_path / "out", [written])) == 7


def test_a_childs_exception_is_raised_here_with_its_traceback(rows, tmp_path, child):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    (task,) = _tasks(rows, blocked, shards=1)
    with pytest.raises(OSError) as raised:
        child.write(task)
    assert "in the shard writer process" in "".join(raised.value.__notes__)
    assert child.write(_tasks(rows, tmp_path / "out", shards=1)[0])  # the child lives on


def test_a_child_that_dies_is_a_fault_with_its_signal(rows, tmp_path, child):
    child._child.kill()
    with pytest.raises(FaultError, match="process killed by SIGKILL while writing train-00000"):
        child.write(_tasks(rows, tmp_path / "out", shards=1)[0])


def test_a_child_that_cannot_read_its_input_exits_and_is_reported(rows, tmp_path, child):
    child._child.stdin.write(b"not a pickle")
    child._child.stdin.flush()
    with pytest.raises(FaultError, match="shard writer process exited with code 1"):
        child.write(_tasks(rows, tmp_path / "out", shards=1)[0])


def test_a_failure_in_this_process_stops_the_queue(rows, tmp_path, child):
    failed = threading.Event()

    def failing(task):
        failed.set()
        raise OSError("disk full")

    class AfterTheFailure:
        """The child, held back until this process has failed: else a fast child may take
        every task before this process takes one."""

        def write(self, task):
            failed.wait(30)
            return child.write(task)

    tasks = _tasks(rows, tmp_path / "out", shards=5)
    with pytest.raises(OSError, match="disk full"):
        list(write_shards(tasks, [AfterTheFailure()], failing))
    assert len(list((tmp_path / "out").glob("train-*"))) < 5


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt thresholds are glibc's")
def test_shard_writer_processes_keep_freed_memory():
    assert keep_freed_memory() and keep_freed_memory()  # taken, and harmless to repeat


def test_forks_in_a_process_running_one_thread():
    if only_thread():
        pytest.skip("this process runs one thread: the fork tests ran here")
    selected = ["-k", "fork and not running_one_thread", "-p", "no:cacheprovider"]
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, *selected], capture_output=True, text=True
    )
    assert ran.returncode == 0 and " skipped" not in ran.stdout, ran.stdout + ran.stderr
