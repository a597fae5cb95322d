"""Faults a run cannot survive, made real: a full tmpfs, a file system remounted read-only under
a run, a shard writer killed, Ctrl-C, another run committing the same output first. Each is one
line that names the cause and what to do, exit status 3 (130 for Ctrl-C), the traceback in a log
file, the run's temporary files removed and the output left uncommitted."""

import dataclasses
import errno
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import BEAM, encode, make_images, photo, write_manifest

from pipeline.cli import EXIT_FAULT, EXIT_INTERRUPTED, main
from pipeline.commit import read_info
from pipeline.faults import as_fault
from pipeline.publish import MARKER, write_dataset_files
from pipeline.verify import verify
from transforms.errors import FaultError, UserError
from transforms.shard_writer import INDEX_DIR, TMP_DIR

COMMAND = Path(sys.executable).parent / "tfrecord-pipeline"
WAIT_S = 120  # only a bound on a hung run, never a timing that is checked


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KB tmpfs mounted for the test: writes past its size fail with ENOSPC."""
    disk = tmp_path / "disk"
    disk.mkdir()
    command = ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)]
    mounted = subprocess.run(command, capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)]).returncode:
            subprocess.run(["umount", "--lazy", str(disk)], check=True)


def _start(tmp_path: Path, *argv) -> subprocess.Popen:
    """The installed command converting in a process (and session) of its own; log files go
    to `tmp_path`. Its SIGINT is the default one even when this suite runs as a background job
    (a shell starts those with SIGINT ignored, and exec keeps that)."""
    return subprocess.Popen(
        [COMMAND, "convert", "--no_progress", *map(str, argv)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip


def _ended(process: subprocess.Popen) -> tuple[int, str]:
    _, err = process.communicate(timeout=WAIT_S)
    return process.returncode, err


def _fault_line(err: str, cause: str) -> str:
    """The one line of a fault: its cause, what to do, and where the traceback went."""
    assert "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"tfrecord-pipeline: failed: {cause}"), line
    assert "rerun" in line, line
    return line


def _logged_traceback(line: str) -> str:
    log = Path(re.search(r"\(traceback in (\S+)\)$", line).group(1))
    return log.read_text()


def _uncommitted_and_clean(output: Path) -> None:
    assert not (output / MARKER).exists()
    assert not (output / TMP_DIR).exists()


def _large_images(root: Path, copies: int = 2) -> Path:
    """A manifest of full-size photos, about 330 KB per copy of the set: more than the disk."""
    rows = []
    for copy in range(copies):
        for name in ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg"):
            path = root / f"{copy}-{name}.jpg"
            path.write_bytes(encode(photo(name), quality=95))
            rows.append({"image_uri": path.name, "label": name.split(".")[0]})
    return write_manifest(root / "large.csv", rows)


def _pause_after(output: Path, shard: str) -> Path:
    """With --write_index, the writer of `shard` renames it into place, then opens
    `index/<shard>.idx` to write the index: made a FIFO here, it waits there, with no file open
    on the disk, until the test opens the FIFO's other end. So the test acts while the run is
    midway."""
    (output / INDEX_DIR).mkdir(parents=True, exist_ok=True)
    fifo = output / INDEX_DIR / f"{shard}.idx"
    os.mkfifo(fifo)
    return fifo


def _wait_for(path: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if process.poll() is not None:
            pytest.fail(f"the run ended before {path} was written: {process.communicate()}")
        if time.monotonic() > deadline:
            pytest.fail(f"{path} not written in {WAIT_S} s")
        time.sleep(0.01)


def _release(fifo: Path) -> int:
    """A reading end of `fifo`, which lets its writer on (an index fits the pipe's buffer)."""
    return os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_a_full_disk_is_one_line_exit_3_and_leaves_no_temp_files(tmp_path, small_disk):
    manifest = _large_images(tmp_path)
    output = small_disk / "out"
    status, err = _ended(_start(tmp_path, "--manifest", manifest, "--output", output))
    assert status == EXIT_FAULT
    line = _fault_line(err, "no space left on the device")
    assert "OSError: [Errno 28] No space left on device" in _logged_traceback(line)
    _uncommitted_and_clean(output)
    # --debug prints the traceback instead, the same line last.
    start = _start(tmp_path, "--manifest", manifest, "--output", output, "--debug")
    status, err = _ended(start)
    assert status == EXIT_FAULT and "Traceback" in err
    assert err.strip().splitlines()[-1] == line.rsplit(" (traceback in ", 1)[0]
    _uncommitted_and_clean(output)


@pytest.mark.slow
def test_a_full_disk_under_the_beam_pipeline_is_the_same_fault(tmp_path, small_disk, capsys,
                                                               monkeypatch):  # fmt: skip
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where the log file goes
    output = small_disk / "out"
    argv = ["convert", "--manifest", str(_large_images(tmp_path)), "--output", str(output)]
    assert main([*argv, "--no_progress", *BEAM]) == EXIT_FAULT
    line = _fault_line(capsys.readouterr().err, "no space left on the device")
    assert "[while running 'WriteShards/" in _logged_traceback(line)  # raised inside Beam
    _uncommitted_and_clean(output)


def test_a_file_system_turned_read_only_during_the_run(tmp_path, small_disk):
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    output = small_disk / "out"
    fifo = _pause_after(output, "train-00000-of-00001.tfrecord")
    run = _start(tmp_path, "--manifest", manifest, "--output", output, "--write_index")
    _wait_for(output / "train-00000-of-00001.tfrecord", run)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    reader = _release(fifo)
    status, err = _ended(run)
    os.close(reader)
    assert status == EXIT_FAULT
    line = _fault_line(err, f"the file system ({output}")
    assert "is read-only" in line and "Read-only file system" in _logged_traceback(line)
    assert not (output / MARKER).exists() and not list((output / TMP_DIR).iterdir())


def test_a_killed_shard_writer_is_one_line_exit_3(tmp_path):
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=2))
    output = tmp_path / "out"
    shards = [f"train-0000{index}-of-00002.tfrecord" for index in range(2)]
    fifos = [_pause_after(output, shard) for shard in shards]
    run = _start(tmp_path, "--manifest", manifest, "--output", output, "--num_shards", "2",
                 "--processes", "2", "--write_index")  # fmt: skip
    for shard in shards:  # then this process waits after one shard, its child after the other
        _wait_for(output / shard, run)
    (child,) = _children(run.pid)
    os.kill(child, signal.SIGKILL)
    readers = [_release(fifo) for fifo in fifos]
    status, err = _ended(run)
    for reader in readers:
        os.close(reader)
    assert status == EXIT_FAULT
    line = _fault_line(err, "a shard writer process killed by SIGKILL while writing train-0000")
    assert "FaultError" in _logged_traceback(line)
    _uncommitted_and_clean(output)


def test_ctrl_c_is_exit_130_and_leaves_no_temp_files(tmp_path):
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    output = tmp_path / "out"
    _pause_after(output, "train-00000-of-00001.tfrecord")
    run = _start(tmp_path, "--manifest", manifest, "--output", output, "--write_index")
    _wait_for(output / "train-00000-of-00001.tfrecord", run)
    os.killpg(run.pid, signal.SIGINT)  # as Ctrl-C does: the whole process group
    status, err = _ended(run)
    assert status == EXIT_INTERRUPTED
    assert err.strip() == "tfrecord-pipeline: interrupted"
    _uncommitted_and_clean(output)


def test_a_run_that_loses_the_race_to_another_says_so(tmp_path):
    rows = make_images(tmp_path, per_class=2)
    manifest = write_manifest(tmp_path / "m.csv", rows)
    output = tmp_path / "out"
    shard = "train-00000-of-00001.tfrecord"
    fifo = _pause_after(output, shard)
    argv = ["--manifest", manifest, "--output", output, "--num_shards", "1"]
    loser = _start(tmp_path, *argv, "--write_index")
    _wait_for(output / shard, loser)
    assert main(["convert", *map(str, argv), "--no_progress"]) == 0  # the winner
    reader = _release(fifo)
    status, err = _ended(loser)
    os.close(reader)
    assert status == EXIT_FAULT
    _fault_line(err, f"another run committed {output} while this one ran")
    records, problems = verify(str(output))
    assert records == len(rows) and not problems  # the winner's dataset, untouched


def test_a_commit_never_replaces_a_dataset_another_run_committed(tmp_path):
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    output = tmp_path / "out"
    assert main(["convert", "--manifest", str(manifest), "--output", str(output),
                 "--no_progress"]) == 0  # fmt: skip
    info, labels = read_info(str(output)), (output / "labels.txt").read_text()
    files = {path: path.read_bytes() for path in output.rglob("*") if path.is_file()}
    write_dataset_files(str(output), info, labels, [])  # this very commit, retried
    other = dataclasses.replace(info, options={**info.options, "label_offset": 1})
    with pytest.raises(FaultError, match="another run committed"):
        write_dataset_files(str(output), other, labels, [])
    assert {path: path.read_bytes() for path in files} == files


def test_faults_are_told_from_bugs_through_the_chain_of_causes():
    from google.api_core import exceptions as api

    def raised(error, cause=None, suppress=False):
        try:
            try:
                raise cause or ValueError()
            except BaseException as inner:
                raise error from (None if suppress else inner)
        except BaseException as outer:
            return outer

    full = OSError(errno.ENOSPC, "No space left on device")
    # Beam re-raises a step's exception as a RuntimeError raised from it.
    assert "no space left" in str(as_fault(raised(RuntimeError("in a step"), full)))
    assert "quota" in str(as_fault(api.TooManyRequests("rate limit")))
    assert "kept failing" in str(as_fault(api.ServiceUnavailable("try again")))
    assert "kept failing" in str(as_fault(api.RetryError("deadline", api.BadGateway("x"))))
    assert as_fault(FaultError("killed")).args == ("killed",)
    for bug in (
        ValueError("a bug"),
        api.NotFound("no such object"),
        api.Forbidden("no permission"),
        OSError(errno.EACCES, "Permission denied"),
        raised(UserError("a mistake"), full, suppress=True),  # `from None` ends the chain
    ):
        assert as_fault(bug) is None, bug


def test_a_bug_keeps_its_traceback(tmp_path, monkeypatch):
    def bug(*_):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("pipeline.cli.convert", bug)
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    with pytest.raises(ZeroDivisionError):
        main(["convert", "--manifest", str(manifest), "--output", str(tmp_path / "o")])
