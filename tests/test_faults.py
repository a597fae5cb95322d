"""Runs that end badly, made real with the installed command: killed (the parent alone, or its
whole group) midway through its shards or while publishing, two runs into one dataset at once,
a duplicate attempt at a shard, a full disk at each step, a file system turned read-only, a
killed shard writer, Ctrl-C, and folders that are not this tool's datasets.

However a run ends, the published version stays byte for byte what it was and verifies, and
rerunning the same command publishes a complete new version and deletes what the dead run left.
Runs are paused without mocks: a run stops at publishing while this process holds the root's
lock, and a run's process group is stopped (SIGSTOP) once its first shard file exists.
"""

import contextlib
import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import (
    BEAM,
    RUNNERS,
    arguments,
    encode,
    make_images,
    photo,
    published,
    read_manifest,
    write_manifest,
)

from tfrecord_pipeline.cli.main import (
    EXIT_BUG,
    EXIT_FAULT,
    EXIT_INTERRUPTED,
    EXIT_SUPERSEDED,
    EXIT_USER_ERROR,
    main,
)
from tfrecord_pipeline.config.arguments import parse_args
from tfrecord_pipeline.config.conversion import prepare
from tfrecord_pipeline.dataset.commit import commit_dataset, read_info
from tfrecord_pipeline.dataset.publish import LOCK, start
from tfrecord_pipeline.dataset.versions import MARKER, POINTER, STAGING, VERSIONS
from tfrecord_pipeline.read.reader import examples
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.transforms.local.error_sink import ErrorSink
from tfrecord_pipeline.transforms.local.pool import ShardPool
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.sharding import ShardId
from tfrecord_pipeline.transforms.stages import PublishInputs
from tfrecord_pipeline.transforms.write.error_files import ROWS_PER_ERRORS_FILE
from tfrecord_pipeline.transforms.write.tasks import ShardTask, run_task

COMMAND = Path(sys.executable).parent / "tfrecord-pipeline"
WAIT_S = 120  # only a bound on a hung run, never a timing that is checked
# Downscaling every image keeps a run in its shards long enough to be stopped there.
SLOW = ("--resize_short_side", "480", "--num_shards", "8", "--processes", "2")


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    """96 rows of 768-pixel photos (hard links to four files): shards that take a while."""
    folder = tmp_path_factory.mktemp("photos")
    rows = []
    for name in ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg"):
        source = folder / f"{name}.jpg"
        source.write_bytes(encode(photo(name).resize((768, 768)), quality=90))
        for copy in range(24):
            os.link(source, folder / f"{copy}-{source.name}")
            rows.append({"image_uri": f"{copy}-{source.name}", "label": name.split(".")[0]})
    return write_manifest(folder / "photos.csv", rows)


@pytest.fixture
def small(tmp_path) -> Path:
    """A manifest of eight small JPEGs: a run of a fraction of a second."""
    return write_manifest(tmp_path / "small.csv", make_images(tmp_path, per_class=2))


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs mounted for the test: writes past its size fail with ENOSPC."""
    disk = tmp_path / "disk"
    disk.mkdir()
    command = ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)]
    mounted = subprocess.run(command, capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)]).returncode:
            subprocess.run(["umount", "--lazy", str(disk)], check=True)


@pytest.fixture(autouse=True)
def no_process_left(tmp_path):
    """After the test, kills what it started and left (stopped or orphaned, when it failed):
    the processes whose TMPDIR is this test's folder, as `_start` sets it."""
    yield
    mark = f"\0TMPDIR={tmp_path}\0".encode()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if mark in b"\0" + environ.read_bytes():
                os.kill(int(environ.parent.name), signal.SIGKILL)


def _start(tmp_path: Path, *argv, sigint=signal.SIG_DFL) -> subprocess.Popen:
    """The installed command converting in a process (and session) of its own; log files go
    to `tmp_path`. Its SIGINT is the default one even when this suite runs as a background job
    (a shell starts those with SIGINT ignored, and exec keeps that), unless `sigint` says."""
    return subprocess.Popen(
        [COMMAND, "convert", "--no_progress", *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
    )


def _ended(process: subprocess.Popen) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=WAIT_S)
    return process.returncode, out, err


def _killed(process: subprocess.Popen) -> None:
    """Waits for a killed parent. Not for its output's end: orphaned children hold the pipes."""
    process.wait(timeout=WAIT_S)
    process.stdout.close()
    process.stderr.close()


def _convert(tmp_path: Path, manifest: Path, root: Path, *flags) -> Path:
    """A run to the end that publishes; returns the version it published."""
    status, out, err = _ended(_start(tmp_path, "--manifest", manifest, "--output", root, *flags))
    assert status == 0, err
    version = published(root)
    assert f"version: {version}  (published)" in out
    return version


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


def _published_files(root: Path) -> dict[str, bytes]:
    """The pointer and every file of the version it names, by their paths under the root."""
    version = published(root)
    files = {
        p.relative_to(root).as_posix(): p.read_bytes() for p in version.rglob("*") if p.is_file()
    }
    return {POINTER: (root / POINTER).read_bytes(), **files}


def _intact(root: Path, before: dict[str, bytes]) -> None:
    """The version published before is still the published one, every byte of it, and it
    verifies, as the command says too."""
    assert _published_files(root) == before
    records, problems = verify(str(root))
    assert records and not problems, problems
    done = subprocess.run([COMMAND, "verify", root], capture_output=True, text=True)
    assert done.returncode == 0 and f"ok, {records:,} records verified" in done.stdout


def _versions(root: Path) -> set[str]:
    return {path.name for path in (root / VERSIONS).iterdir()}


def _nothing_published(root: Path) -> None:
    """A first run that failed: no pointer, no version, nothing staged."""
    assert not (root / POINTER).exists()
    assert not list(root.glob(f"{VERSIONS}/*")) and not list(root.glob(f"{STAGING}/*"))


def _wait_for(found, process: subprocess.Popen, what: str):
    """Polls `found()` until it returns something, while `process` runs."""
    deadline = time.monotonic() + WAIT_S
    while not (result := found()):
        if process.poll() is not None:
            pytest.fail(f"the run ended before {what}: {process.communicate()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} in {WAIT_S} s")
        time.sleep(0.005)
    return result


def _wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {WAIT_S} s")
        time.sleep(0.01)


def _state(pid: int) -> str:
    """A process's state letter (R, S, T, Z, ...); "" once it has gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _gone(pids: list[int]) -> bool:
    """Every process ended (a zombie nobody reaps has ended too)."""
    return all(_state(pid) in ("", "Z") for pid in pids)


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


def _stop_mid_shards(run: subprocess.Popen, root: Path) -> tuple[str, list[int]]:
    """Stops the run's whole process group once a shard file exists in its staging folder,
    and checks that it is still midway: its version folder is not made yet. Returns its
    version's name and its child processes."""
    staged = _wait_for(lambda: list(root.glob(f"{STAGING}/*/*")), run, "a staged shard file")
    os.killpg(run.pid, signal.SIGSTOP)
    members = [run.pid, *_children(run.pid)]
    _wait_until(lambda: all(_state(pid) in ("T", "t") for pid in members), "the group stopped")
    version = staged[0].parent.name
    assert not (root / VERSIONS / version).exists(), "the run was past its shards: slow them"
    return version, members[1:]


def _writes_in(pid: int, folder: Path) -> bool:
    """Whether process `pid` holds a file under `folder` open."""
    fds = Path(f"/proc/{pid}/fd")
    with contextlib.suppress(OSError):
        return any(os.readlink(fd).startswith(f"{folder}/") for fd in fds.iterdir())
    return False


@contextlib.contextmanager
def _publishing_held(root: Path, lock: Path | None = None):
    """While this holds the root's lock, a run into `root` stops at publishing: its version
    complete (marker included), the pointer not written."""
    root.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(lock or root / LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _complete_new(root: Path, known: set[str], run: subprocess.Popen, count: int = 1) -> set:
    """Waits until `count` versions not in `known` are complete (their marker written)."""

    def found():
        done = {path.parent.name for path in root.glob(f"{VERSIONS}/*/{MARKER}")} - known
        return done if len(done) >= count else None

    return _wait_for(found, run, f"{count} new complete version(s)")


def _rerun_completes(tmp_path, manifest, root, before, flags=()) -> Path:
    """The same command again publishes a complete new version from the published one and
    deletes what the dead run left: its staging folder and its version."""
    first = published(root).name
    _intact(root, before)
    version = _convert(tmp_path, manifest, root, *flags)
    assert version.name != first and (version / MARKER).exists()
    assert verify(str(root)) == verify(str(version))
    assert _versions(root) == {first, version.name}
    assert not list((root / STAGING).iterdir())
    return version


def test_a_parent_killed_alone_midway_takes_its_writers_with_it(tmp_path, photos):
    root = tmp_path / "root"
    flags = SLOW
    _convert(tmp_path, photos, root, *flags)
    before, versions = _published_files(root), _versions(root)
    run = _start(tmp_path, "--manifest", photos, "--output", root, *flags)
    dead, children = _stop_mid_shards(run, root)
    assert children  # shard writers beside the parent
    run.kill()  # SIGKILL to the parent alone, as the OOM killer sends it
    _killed(run)
    os.killpg(run.pid, signal.SIGCONT)  # the children run on, parentless
    _wait_until(lambda: _gone(children), "the orphaned shard writers' exit")
    assert _versions(root) == versions and (root / STAGING / dead).exists()
    _rerun_completes(tmp_path, photos, root, before, flags)


def test_a_process_group_killed_midway_leaves_the_published_version(tmp_path, photos):
    root = tmp_path / "root"
    _convert(tmp_path, photos, root, *SLOW)
    before = _published_files(root)
    run = _start(tmp_path, "--manifest", photos, "--output", root, *SLOW)
    _, children = _stop_mid_shards(run, root)
    os.killpg(run.pid, signal.SIGKILL)
    _killed(run)
    _wait_until(lambda: _gone(children), "the shard writers' exit")
    _rerun_completes(tmp_path, photos, root, before, SLOW)


def _new_folder(root: Path, known: set[str], run: subprocess.Popen) -> set:
    """Waits until a version folder not in `known` exists (its files being moved in)."""
    return _wait_for(lambda: _versions(root) - known, run, "a new version folder")


@pytest.mark.parametrize(
    "kill, when",
    [
        (lambda run: run.kill(), _complete_new),
        (lambda run: os.killpg(run.pid, signal.SIGKILL), _complete_new),
        (lambda run: run.terminate(), _complete_new),
        (lambda run: os.killpg(run.pid, signal.SIGKILL), _new_folder),
    ],
    ids=["SIGKILL-parent", "SIGKILL-group", "SIGTERM-parent", "SIGKILL-group-finalising"],
)
def test_a_run_killed_while_publishing_publishes_nothing(tmp_path, small, kill, when):
    root = tmp_path / "root"
    _convert(tmp_path, small, root)
    before, versions = _published_files(root), _versions(root)
    with _publishing_held(root):  # it gets no further than publishing
        run = _start(tmp_path, "--manifest", small, "--output", root)
        (dead,) = when(root, versions, run)
        children = _children(run.pid)
        kill(run)
        _killed(run)
    _wait_until(lambda: _gone(children), "the shard writers' exit")
    assert _versions(root) == versions | {dead}  # complete or not, never published
    # Retention keeps published versions: the dead run's complete one is not among them.
    _rerun_completes(tmp_path, small, root, before, ["--keep_versions", "2"])


# What tells two racing runs' outputs apart: one keeps colour, the other converts to grey.
# (Not --label_offset: label ids never change across versions, so a second run with another
# offset is refused as soon as a version exists.)
CHANNELS = (3, 1)


def _one_runs_images(folder: Path, channels: int) -> None:
    """Every record has `channels` channels, as the options say: one run's output."""
    info = read_info(str(folder))
    assert info.options["channels"] == channels
    for split in info.splits:
        for example in examples(str(folder), info, split):
            assert example["image/channels"] == channels


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_two_runs_from_one_version_one_publishes_and_the_other_says_so(tmp_path, small, runner):
    root = tmp_path / "root"
    flags = ["--num_shards", "4", *RUNNERS[runner]]
    _convert(tmp_path, small, root, *flags)
    versions = _versions(root)
    with _publishing_held(root):  # both start from this version, and both get to publish
        runs = [
            _start(tmp_path, "--manifest", small, "--output", root, *flags, "--channels", c)
            for c in CHANNELS
        ]
        _complete_new(root, versions, runs[1], count=2)
    ended = [_ended(run) for run in runs]
    assert sorted(status for status, _, _ in ended) == [0, EXIT_SUPERSEDED]
    winner = next(offset for offset, (status, _, _) in enumerate(ended) if status == 0)
    (line,) = ended[1 - winner][2].strip().splitlines()
    assert re.fullmatch(
        rf"tfrecord-pipeline: failed: another run published v000002-[0-9a-f]{{8}} in {root} "
        r"while this one ran, .*; rerun [^[]*",  # no step name Beam appends
        line,
    ), line
    version = published(root)
    assert f"version: {version}  (published)" in ended[winner][1]
    _one_runs_images(version, CHANNELS[winner])
    assert verify(str(root)) == (8, [])
    assert _versions(root) == versions | {version.name}  # the loser deleted its own
    assert not list((root / STAGING).iterdir())


def test_two_runs_into_an_empty_folder_end_with_one_complete_run_published(tmp_path, small):
    root = tmp_path / "root"
    runs = [
        _start(tmp_path, "--manifest", small, "--output", root, "--channels", channels)
        for channels in CHANNELS
    ]
    ended = [_ended(run) for run in runs]
    statuses = sorted(status for status, _, _ in ended)
    assert statuses in ([0, 0], [0, EXIT_SUPERSEDED]), ended  # in turn, or one lost the race
    for status, _, err in ended:
        if status:
            _fault_line(err, "another run published v000001-")
    versions = {
        Path(re.search(r"version: (\S+)  \(published\)", out).group(1))
        for status, out, _ in ended
        if status == 0
    }
    assert published(root) in versions and _versions(root) == {v.name for v in versions}
    for version in versions:
        _one_runs_images(version, read_info(str(version)).options["channels"])
        assert verify(str(version)) == (8, [])
    assert not list((root / STAGING).iterdir())


def test_a_duplicate_attempt_at_a_shard_is_never_published(tmp_path, small):
    """Two attempts at one shard (Dataflow runs a bundle twice, even at once) that met
    different read failures: the commit publishes the attempt whose results it received; the
    other, in another process, finished before the commit or after it, changes nothing."""
    root = tmp_path / "root"
    argv = arguments(
        "--manifest {m} --output {root} --num_shards 1 --max_error_rate 1", m=small, root=root
    )
    conversion = prepare(*parse_args(argv))
    target = start(str(root))
    rows = list(read_manifest(str(small), 0, ReadConfig()))
    labels = LabelMap(tuple(sorted({row.label for row in rows})))
    config = conversion.write_config(target.staging, 1)
    task = ShardTask(ShardId("train", 0, 1), rows, labels, config, threads=1)
    received = list(run_task(task))  # the attempt whose results the commit receives
    *errors, result = received
    attempt = (Path(target.staging) / result.staged).read_bytes()
    missing = Path(rows[0].image_uri)
    missing.rename(tmp_path / "away")  # a transient failure the other attempts meet
    with ShardPool(1, config.image) as other:
        early = list(other.write([task]))[-1]
        assert early.records == result.records - 1
        plan = DatasetPlan(labels, (("train", len(rows)),), (("train", 1),))
        files, counts = ErrorSink(target.staging).finish(ROWS_PER_ERRORS_FILE)
        inputs = PublishInputs(plan, [result], files, counts, 0)
        info = commit_dataset(conversion.commit_config(target), inputs)
        late = list(other.write([task]))[-1]  # into a staging folder no commit will read
    assert info.records == len(rows) and not errors
    version = published(root)
    assert (version / result.file).read_bytes() == attempt
    assert not {early.staged, late.staged} & {path.name for path in version.rglob("*")}
    assert (Path(target.staging) / late.staged).exists()
    assert verify(str(root), "all") == (len(rows), [])
    (tmp_path / "away").rename(missing)
    _rerun_completes(tmp_path, small, root, _published_files(root), ["--num_shards", "1"])


def _leave_free(disk: Path, filler: Path, blocks: int) -> None:
    """Sizes `filler` so that exactly `blocks` blocks of the disk stay free."""
    status = os.statvfs(disk)
    size = filler.stat().st_size if filler.exists() else 0
    size += (status.f_bavail - blocks) * status.f_frsize
    with open(filler, "ab") as handle:
        handle.truncate(size)  # frees the blocks past the size
        os.posix_fallocate(handle.fileno(), 0, size)
    assert os.statvfs(disk).f_bavail == blocks


def test_a_full_disk_at_each_step_is_one_line_exit_3_and_changes_nothing(
    tmp_path, small, small_disk
):
    """The disk fills while a shard is written, then as the marker is, then as the pointer
    is: each time the published version stays as it was, no empty or partial marker or
    pointer is left, and the run's own files are deleted."""
    root = small_disk / "root"
    version = _convert(tmp_path, small, root)
    before = _published_files(root)
    frsize = os.statvfs(small_disk).f_frsize
    # What a run of the same input needs, the marker and the pointer aside.
    needed = sum(
        -(-path.stat().st_blocks * 512 // frsize)
        for path in version.rglob("*")
        if path.is_file() and path.name != MARKER
    )
    argv = ["--manifest", small, "--output", root]
    lines = []
    for free, where in (
        (needed // 2, ", in write_shard\n"),
        (needed, ", in write_durably\n"),
        (needed + 1, ", in publish\n"),
    ):
        _leave_free(small_disk, small_disk / "filler", free)
        status, _, err = _ended(_start(tmp_path, *argv))
        assert status == EXIT_FAULT
        lines.append(line := _fault_line(err, "no space left on the device"))
        logged = _logged_traceback(line)
        assert "[Errno 28] No space left on device" in logged and where in logged
        if free == needed:  # the marker: neither the metadata before it nor the pointer after
            assert ", in write_version_files\n" not in logged and ", in publish\n" not in logged
        _intact(root, before)
        assert _versions(root) == {version.name} and not list((root / STAGING).iterdir())
        assert not list(root.rglob("*.tmp-*")) and os.statvfs(small_disk).f_bavail == free
    # --debug prints the traceback instead, the same line last.
    _leave_free(small_disk, small_disk / "filler", needed // 2)
    status, _, err = _ended(_start(tmp_path, *argv, "--debug"))
    assert status == EXIT_FAULT and "Traceback" in err
    assert err.strip().splitlines()[-1] == lines[0].rsplit(" (traceback in ", 1)[0]
    _intact(root, before)


@pytest.mark.slow
def test_a_full_disk_under_the_beam_pipeline_is_the_same_fault(tmp_path, small_disk):
    rows = []
    for copy in range(2):  # about 660 KB of full-size photos: more than the disk
        for name in ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg"):
            path = tmp_path / f"{copy}-{name}.jpg"
            path.write_bytes(encode(photo(name), quality=95))
            rows.append({"image_uri": path.name, "label": name.split(".")[0]})
    manifest = write_manifest(tmp_path / "large.csv", rows)
    _leave_free(small_disk, small_disk / "filler", 64)
    root = small_disk / "root"
    status, _, err = _ended(_start(tmp_path, "--manifest", manifest, "--output", root, *BEAM))
    assert status == EXIT_FAULT
    line = _fault_line(err, "no space left on the device")
    assert "[while running 'WriteShards/" in _logged_traceback(line)  # raised inside Beam
    _nothing_published(root)


def test_a_file_system_turned_read_only_while_publishing(tmp_path, small, small_disk):
    root = small_disk / "root"
    _convert(tmp_path, small, root)
    before, versions = _published_files(root), _versions(root)
    # The lock held from another file system: a file open for writing on the disk (as the
    # waiting run holds its lock) would keep it from being remounted read-only.
    (root / LOCK).unlink()
    (root / LOCK).symlink_to(tmp_path / "lock")
    with _publishing_held(root, tmp_path / "lock"):
        run = _start(tmp_path, "--manifest", small, "--output", root)
        (dead,) = _complete_new(root, versions, run)
        subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    status, _, err = _ended(run)
    assert status == EXIT_FAULT
    line = _fault_line(err, f"the file system ({root}/{POINTER}.tmp-")  # the pointer first
    assert "is read-only" in line and "Read-only file system" in _logged_traceback(line)
    _intact(root, before)
    subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    assert _versions(root) == versions | {dead}  # nothing could be deleted: the rerun does
    _rerun_completes(tmp_path, small, root, before)


def test_a_killed_shard_writer_is_one_line_exit_3(tmp_path, photos):
    root = tmp_path / "root"
    run = _start(tmp_path, "--manifest", photos, "--output", root, *SLOW)
    version, children = _stop_mid_shards(run, root)
    (writing,) = [pid for pid in children if _writes_in(pid, root / STAGING / version)][:1]
    os.kill(writing, signal.SIGKILL)  # not a worker yet to take a shard: its death names none
    os.killpg(run.pid, signal.SIGCONT)
    status, _, err = _ended(run)
    assert status == EXIT_FAULT
    line = _fault_line(err, "a shard writer process killed by SIGKILL while writing train-0000")
    assert "FaultError" in _logged_traceback(line)
    _nothing_published(root)


def test_ctrl_c_is_exit_130_and_leaves_nothing(tmp_path, photos):
    root = tmp_path / "root"
    run = _start(tmp_path, "--manifest", photos, "--output", root, *SLOW)
    _, children = _stop_mid_shards(run, root)
    os.killpg(run.pid, signal.SIGINT)  # as Ctrl-C does: the whole process group
    os.killpg(run.pid, signal.SIGCONT)
    status, _, err = _ended(run)
    assert (status, err.strip()) == (EXIT_INTERRUPTED, "tfrecord-pipeline: interrupted")
    _wait_until(lambda: _gone(children), "the shard writers' exit")
    _nothing_published(root)


def test_a_run_that_ignores_sigint_ignores_it_in_its_shard_writers_too(tmp_path, photos):
    """A shell script's background job ignores SIGINT; its shard writers did not, so a Ctrl-C
    meant for the foreground killed them and failed the run with exit 3."""
    root = tmp_path / "root"
    run = _start(tmp_path, "--manifest", photos, "--output", root, *SLOW, sigint=signal.SIG_IGN)
    _stop_mid_shards(run, root)
    os.killpg(run.pid, signal.SIGINT)
    os.killpg(run.pid, signal.SIGCONT)
    status, _, err = _ended(run)
    assert status == 0, err
    assert verify(str(published(root)))[1] == []


def _everything(folder: Path) -> dict:
    """Every entry under `folder`, with its kind, bytes, mode and times."""
    found = {}
    for path in [folder, *folder.rglob("*")]:
        status = path.lstat()
        data = path.read_bytes() if path.is_file() else None
        found[path] = (status.st_mode, status.st_mtime_ns, status.st_ctime_ns, data)
    return found


def _single_folder_dataset(folder: Path) -> None:
    """The layout of tfrecord-pipeline 0.1: a dataset's files at the folder's top."""
    (folder / "errors").mkdir()
    (folder / "errors/errors.jsonl").write_text("")
    (folder / "train-00000-of-00001.tfrecord").write_bytes(b"\0" * 64)
    (folder / "labels.txt").write_text("cat\n")
    (folder / "dataset_info.json").write_text("{}")
    (folder / MARKER).write_text('{"dataset_info.json": "0"}')


def _someones_folder(folder: Path) -> None:
    (folder / "_tmp").mkdir()
    (folder / "_tmp/draft.tfrecord").write_bytes(b"draft")
    (folder / "train-00000-of-00002.tfrecord").write_bytes(b"not ours")
    (folder / "labels.txt").write_text("theirs\n")
    (folder / "notes.md").write_text("keep me")


@pytest.mark.parametrize(
    "make, message",
    [
        (_someones_folder, "is not empty and is not a tfrecord-pipeline dataset"),
        (_single_folder_dataset, "holds a dataset in the single-folder layout"),
        (lambda folder: (folder / POINTER).write_text("v1\n"), "is not a version pointer"),
    ],
    ids=["foreign", "single-folder", "foreign-pointer"],
)
def test_a_folder_that_is_not_a_dataset_is_refused_and_left_as_it_was(
    tmp_path, small, capsys, make, message
):
    folder = tmp_path / "theirs"
    folder.mkdir()
    make(folder)
    before = _everything(folder)
    status = main(["convert", "--manifest", str(small), "--output", str(folder), "--no_progress"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert status == EXIT_USER_ERROR and line.startswith("tfrecord-pipeline: error: ")
    assert message in line
    assert _everything(folder) == before


def test_retention_deletes_old_versions_only_after_publishing_and_readers_keep_theirs(
    tmp_path, small
):
    root = tmp_path / "root"
    flags = ["--num_shards", "2", "--keep_versions", "2"]
    made = [_convert(tmp_path, small, root, *flags).name for _ in range(3)]
    assert _versions(root) == set(made[1:])
    # A reader resolves the published version and reads its first shard...
    folder, info = published(root), read_info(str(published(root)))
    reading = examples(str(folder), info, "train")
    first = next(reading)
    with _publishing_held(root):
        run = _start(tmp_path, "--manifest", small, "--output", root, *flags)
        (new,) = _complete_new(root, set(made), run)
        assert _versions(root) == {*made[1:], new}  # nothing deleted before publishing
        assert published(root) == folder
    assert _ended(run)[0] == 0
    assert published(root).name == new and _versions(root) == {made[2], new}
    # ... and reads the rest of it after a newer one was published.
    assert first and 1 + sum(1 for _ in reading) == info.splits["train"].examples
    assert verify(str(folder)) == (8, [])


def test_the_command_exits_70_on_a_bug_never_1_which_is_the_gates(tmp_path):
    """A bug made the command exit 1 with Python's traceback: the nightly DAG reads 1 as a
    version the quality gates kept from publishing. The traceback stays; the status is 70."""
    bugged = (
        "import tfrecord_pipeline.cli.main as command\n"
        "def bug(*_):\n"
        "    raise ZeroDivisionError('a bug')\n"
        "command.convert_prepared = bug\n"
        "command.entry_point()\n"
    )
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    argv = ["convert", "--manifest", str(manifest), "--output", str(tmp_path / "o")]
    done = subprocess.run(
        [sys.executable, "-c", bugged, *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == EXIT_BUG == 70
    assert "ZeroDivisionError: a bug" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("tfrecord-pipeline: internal error: a bug")


def test_a_bug_keeps_its_traceback(tmp_path, monkeypatch):
    def bug(*_):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("tfrecord_pipeline.cli.main.convert_prepared", bug)
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    with pytest.raises(ZeroDivisionError):
        main(["convert", "--manifest", str(manifest), "--output", str(tmp_path / "o")])
