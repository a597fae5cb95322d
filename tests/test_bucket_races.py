"""Publication into a bucket as safe as on a local disk, shown by racing processes through the
fault proxy (tests/fault_proxy.py), which answers generation preconditions as Cloud Storage
does (the emulator ignores them) and fails reads, whole uploads, copies and deletions at a
rate, a write's answer lost after it took effect among them: whatever wins, `LATEST` names a
whole version, every kept version verifies, and every loser exits 4 in one line."""

import os
import signal
import subprocess
import sys
import threading

import pytest
from conftest import make_images, write_manifest

from tfrecord_pipeline.cli.main import EXIT_OK, EXIT_SUPERSEDED, main
from tfrecord_pipeline.dataset import history, publish
from tfrecord_pipeline.dataset.publish import read_pointer
from tfrecord_pipeline.dataset.retention import clean_up
from tfrecord_pipeline.dataset.rollback import rollback
from tfrecord_pipeline.dataset.versions import LEASE, MARKER, POINTER, STAGING, VERSIONS, Pointer
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.transforms.storage import fileio

# Each child's retries wait milliseconds, as the in-process tests' do (tests/conftest.py).
_CHILD = (
    "import sys\n"
    "from tfrecord_pipeline.transforms.storage import retry\n"
    "retry.FIRST_DELAY_S = 0.001\n"
    "from tfrecord_pipeline.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
FAULT_RATE = 0.08


@pytest.fixture
def small(tmp_path):
    return write_manifest(tmp_path / "small.csv", make_images(tmp_path, per_class=2))


def _start(argv: list[str], env: dict) -> subprocess.Popen:
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, "env": env}
    return subprocess.Popen([sys.executable, "-c", _CHILD, *argv], **pipes)


def _ended(runs: list[subprocess.Popen]) -> list[tuple[int, str]]:
    said = [run.communicate(timeout=300)[1] for run in runs]
    return [(run.returncode, err) for run, err in zip(runs, said, strict=True)]


def _lost_in_one_line(status: int, err: str) -> bool:
    lines = err.strip().splitlines()
    return status == EXIT_SUPERSEDED and len(lines) == 1 and "another run" in lines[0]


def _whole(root: str) -> list[str]:
    """The versions kept in `root`, once each is found to verify and `LATEST` to name one."""
    kept = fileio.names_in(fileio.join(root, VERSIONS))
    published = read_pointer(root)[0]
    assert published and published.version in kept
    for version in kept:
        assert verify(fileio.join(root, VERSIONS, version)) == (8, []), version
    assert verify(root) == (8, [])
    return kept


@pytest.mark.slow
@pytest.mark.parametrize("at_once", [2, 3, 5])
def test_concurrent_publishers_and_a_retention_run_end_whole(
    tmp_path, small, gcs, faulty_gcs, at_once
):
    """`at_once` runs and one with --keep_versions 2 into one bucket root at once, through
    faults: each publishes (0) or loses (4, one line); LATEST names a version that verifies,
    every kept version verifies, no staging is left, no lease is left held."""
    proxy = faulty_gcs(f"{tmp_path.name}/", rate=FAULT_RATE, seed=at_once, writes_too=True)
    root = f"gs://tfrp-test/{tmp_path.name}/root"
    argv = ["convert", "--manifest", str(small), "--output", root, "--no_progress"]
    assert main([*argv, "--num_shards", "2"]) == EXIT_OK
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    flags = [["--num_shards", "2"]] * at_once + [["--num_shards", "2", "--keep_versions", "2"]]
    ended = _ended([_start([*argv, *extra], env) for extra in flags])
    for status, err in ended:
        assert status == EXIT_OK or _lost_in_one_line(status, err), (status, err)
    assert EXIT_OK in [status for status, _ in ended]
    assert proxy.faults, "the proxy met no fault"
    kept = _whole(root)
    recorded = history.newest_first(history.read_records(root))
    assert set(kept) <= set(recorded) and recorded[0] == read_pointer(root)[0].version
    assert not fileio.names_in(fileio.join(root, STAGING))
    assert not fileio.exists(fileio.join(root, LEASE))


@pytest.mark.slow
def test_a_rollback_racing_a_run_with_keep_versions_never_leaves_latest_on_a_deleted_version(
    tmp_path, small, gcs, faulty_gcs
):
    """Rounds of a rollback to the version before the published one, at once with a run that
    keeps one version: whichever goes first, LATEST names a whole version, and each command
    ends 0, or 4 in one line (the rollback's version deleted before it could look: 2)."""
    faulty_gcs(f"{tmp_path.name}/", rate=FAULT_RATE, seed=11, writes_too=True)
    root = f"gs://tfrp-test/{tmp_path.name}/root"
    argv = ["convert", "--manifest", str(small), "--output", root, "--no_progress"]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    for _ in range(3):
        assert main([*argv, "--num_shards", "2"]) == EXIT_OK
        assert main([*argv, "--num_shards", "2"]) == EXIT_OK
        before = history.newest_first(history.read_records(root))[1]
        run = _start([*argv, "--num_shards", "2", "--keep_versions", "1"], env)
        rollback = _start(["rollback", root, "--to", before], env)
        for status, err in _ended([run, rollback]):
            assert (
                status == EXIT_OK
                or _lost_in_one_line(status, err)
                or (status == 2 and "has no version" in err)
            ), (status, err)
        _whole(root)


def test_a_rollback_waits_out_the_clean_up_of_the_version_it_races(tmp_path, gcs, faulty_gcs):
    """The clean-up of a run that published v2 with --keep_versions 1 (deleting v1) comes while
    a rollback to v1, v1 found complete, writes LATEST: the clean-up waits for the rollback's
    lease, then finds v1 published and deletes nothing. (Without the lease it deleted v1 under
    the pointer being written to name it.)"""
    proxy = faulty_gcs(f"{tmp_path.name}/")
    root = f"gs://tfrp-test/{tmp_path.name}/root"
    first, second = _published_twice(root, tmp_path)
    clean = threading.Thread(target=clean_up, args=(root, read_pointer(root)[0], 1))

    def clean_up_meanwhile() -> None:
        clean.start()
        clean.join(timeout=3)  # done, unless it waits for the lease

    proxy.at["POST", f"{tmp_path.name}/root/{POINTER}"] = clean_up_meanwhile
    assert rollback(root, first).published.version == first
    clean.join()
    assert read_pointer(root)[0].version == first and _whole(root) == [first, second]


def test_a_publisher_killed_mid_publication_costs_another_run_nothing(tmp_path, gcs, faulty_gcs):
    """A publisher SIGKILLed as it writes LATEST leaves its lease; a run started from the same
    version waits for the lease to expire (2 s, as the killed one wrote it), takes it over and
    publishes: it is not told it lost to the killed one's version, which was never published."""
    proxy = faulty_gcs(f"{tmp_path.name}/")
    root = f"gs://tfrp-test/{tmp_path.name}/root"
    _, base = _published_twice(root, tmp_path)
    run = publish.start(root)
    env = {**os.environ, "TFRECORD_PIPELINE_LEASE_SECONDS": "2"}
    killed = subprocess.Popen([sys.executable, "-c", _PUBLISHER, root], env=env)

    def kill() -> str:
        killed.kill()
        killed.wait()
        return "drop"

    proxy.at["POST", f"{tmp_path.name}/root/{POINTER}"] = kill
    assert killed.wait(timeout=120) == -signal.SIGKILL
    assert fileio.exists(fileio.join(root, LEASE)) and read_pointer(root)[0].version == base
    _complete(run)
    publish.publish(run, Pointer(run.version, "2" * 64))
    assert read_pointer(root)[0].version == run.version
    assert history.newest_first(history.read_records(root))[0] == run.version
    assert not fileio.exists(fileio.join(root, LEASE))


# A run of its own: a version started, made complete and published (killed on the way).
_PUBLISHER = (
    "import sys\n"
    "from tfrecord_pipeline.dataset import publish\n"
    "from tfrecord_pipeline.dataset.versions import MARKER, Pointer\n"
    "from tfrecord_pipeline.transforms.storage import fileio\n"
    "run = publish.start(sys.argv[1])\n"
    "fileio.write_bytes(fileio.join(run.folder, MARKER), b'{}')\n"
    "publish.publish(run, Pointer(run.version, '1' * 64))\n"
)


def _complete(run: publish.Target) -> None:
    fileio.write_bytes(fileio.join(run.folder, MARKER), b"{}")


def _published_twice(root: str, tmp_path) -> list[str]:
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=2))
    argv = ["convert", "--manifest", str(manifest), "--output", root, "--no_progress"]
    for _ in range(2):
        assert main([*argv, "--num_shards", "2"]) == EXIT_OK
    return history.newest_first(history.read_records(root))[::-1]
