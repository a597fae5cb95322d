"""Publication attacked as a hostile user would, with real processes on a real root: each test
is a failure found that way, reproduced exactly (issue 29's must-hold items)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPOSITORY

from tfrecord_pipeline.dataset import publish
from tfrecord_pipeline.dataset.commit import cleaned_up_on_failure
from tfrecord_pipeline.dataset.retention import clean_up
from tfrecord_pipeline.dataset.versions import Pointer


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tfrecord_pipeline.cli.main", *argv],
        capture_output=True,
        text=True,
        cwd=REPOSITORY,
        timeout=600,
    )


def _convert(root, *flags: str) -> subprocess.CompletedProcess:
    manifest = str(REPOSITORY / "sample" / "manifest.csv")
    return _cli("convert", "--manifest", manifest, "--output", str(root), "--no_progress", *flags)


def test_a_run_whose_files_a_winner_deleted_loses_with_4_even_after_a_rollback_to_its_base(
    tmp_path,
):
    """Found by racing runs and rollbacks with SIGKILLs (a traceback, exit 1): run R starts
    from v2 and stages its shards; run S publishes v3 and its clean-up deletes R's staging
    (R can no longer publish); a rollback publishes v2 again. R then fails on its deleted
    files: that is a loss (status 4, SupersededError), though LATEST names R's base again."""
    root = tmp_path / "root"
    for _ in range(2):
        assert _convert(root, "--num_shards", "2").returncode == 0
    target = publish.start(str(root))  # run R, as convert_prepared starts it
    (root / "_staging" / target.version).mkdir()
    (root / "_staging" / target.version / "shard-0").write_bytes(b"R's shard")
    assert _convert(root, "--num_shards", "2").returncode == 0  # run S wins
    assert not (root / "_staging" / target.version).exists()  # S's clean-up took R's files
    rolled = _cli("rollback", str(root), "--to", target.base.version)
    assert rolled.returncode == 0, rolled.stderr
    lost = pytest.raises(publish.SupersededError, match="another run published")
    with lost, cleaned_up_on_failure(target):  # R moves its staged shard into its version
        publish.finalise(target, [("shard-0", "train-00000-of-00001.tfrecord")])


@pytest.mark.parametrize("command", ["convert", "rollback"])
def test_a_folder_named_like_a_pointer_s_temporary_file_is_one_line_not_a_traceback(
    tmp_path, command
):
    """Found by hand: `mkdir ROOT/LATEST.tmp-aa`, then a convert or a rollback into ROOT: each
    ended in an IsADirectoryError traceback (exit 1) while deleting leftover pointer files,
    and so did every later run until the folder was removed by hand. Like a folder where
    LATEST should be, it is refused in one line (status 2) and left as it is."""
    root = tmp_path / "root"
    for _ in range(2):
        assert _convert(root, "--num_shards", "2").returncode == 0
    (root / "LATEST.tmp-aa" / "sub").mkdir(parents=True)
    (root / "LATEST.tmp-aa" / "sub" / "f").write_text("kept")
    latest = (root / "LATEST").read_bytes()
    if command == "convert":
        done = _convert(root, "--num_shards", "2")
    else:
        done = _cli("rollback", str(root), "--to", "1")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert "LATEST.tmp-aa is not a file" in done.stderr
    assert (root / "LATEST").read_bytes() == latest
    assert (root / "LATEST.tmp-aa" / "sub" / "f").read_text() == "kept"


def _blocked_opening_a_fifo(pid: int) -> bool:
    return Path(f"/proc/{pid}/wchan").read_text() == "wait_for_partner"


def test_a_rollback_never_publishes_a_version_retention_deleted_after_it_was_checked(tmp_path):
    """Found by reading rollback.py, shown with real processes: run S publishes v3; rollback R
    to v1 reads LATEST (v3) and finds v1 complete; S's retention (--keep_versions 1) deletes
    v1 under the lock; R then takes the lock, finds LATEST unchanged and publishes v1: LATEST
    names a deleted version and every reader and run of the root fails until a hand fixes it.
    R is held between its checks and its lock by a FIFO standing where the lock file is (its
    open blocks until a writer comes); S's retention runs in this process meanwhile."""
    root = tmp_path / "root"
    for _ in range(3):
        assert _convert(root, "--num_shards", "2").returncode == 0
    published = Pointer.parse((root / "LATEST").read_bytes(), "LATEST")  # S's v3
    (root / ".lock").unlink()
    os.mkfifo(root / ".lock")
    rollback = subprocess.Popen(
        [sys.executable, "-m", "tfrecord_pipeline.cli.main", "rollback", str(root), "--to", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPOSITORY,
    )
    while not _blocked_opening_a_fifo(rollback.pid):  # R checked v1, and waits for the lock
        assert rollback.poll() is None, rollback.communicate()
        time.sleep(0.05)
    (root / ".lock").rename(tmp_path / "fifo")
    (root / ".lock").touch()
    clean_up(str(root), published, keep_versions=1)  # S's retention
    assert sorted(path.name for path in (root / "versions").iterdir()) == [published.version]
    writer = os.open(tmp_path / "fifo", os.O_WRONLY)  # R goes on
    out, err = rollback.communicate(timeout=600)
    os.close(writer)
    assert rollback.returncode == 4, out  # v1 deleted meanwhile: a loss, not a mistake
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert Pointer.parse((root / "LATEST").read_bytes(), "LATEST") == published
    assert _cli("verify", str(root)).returncode == 0


@pytest.mark.parametrize("inside", ["versions/{version}/more", "_staging"])
def test_a_run_never_writes_a_dataset_inside_another_dataset_s_layout(tmp_path, inside):
    """Found by hand: `convert --output ROOT/versions/<published version>/more` (a new folder)
    exits 0 and writes a whole dataset into the published version's folder, which then holds
    more than it did when published (verify passes: it checks the files it lists); with
    `--output ROOT/_staging`, a dataset lands in the staging folder of another. A published
    version never changes: such an --output is refused in one line (status 2)."""
    root = tmp_path / "root"
    assert _convert(root, "--num_shards", "2").returncode == 0
    version = Pointer.parse((root / "LATEST").read_bytes(), "LATEST").version
    folder = root / "versions" / version
    before = sorted(path.relative_to(root) for path in root.rglob("*"))
    done = _convert(root / inside.format(version=version), "--num_shards", "2")
    assert done.returncode == 2, done.stdout
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert sorted(path.relative_to(root) for path in root.rglob("*")) == before
    assert folder.is_dir()
