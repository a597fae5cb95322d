"""Losing is exit 4 with a true message, however the other run won: it published first, or its
retention (--keep_versions 1) deleted the version this run started from while this run read it,
or its clean-up deleted this run's folders while this run still moved files in or deleted them.
Exit 2 is left for what the user can fix. Shown deterministically, and by racing processes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_images, published, write_manifest

from tfrecord_pipeline.cli.main import EXIT_OK, EXIT_SUPERSEDED, main
from tfrecord_pipeline.config.arguments import parse_args
from tfrecord_pipeline.config.conversion import prepare
from tfrecord_pipeline.dataset import publish
from tfrecord_pipeline.dataset.commit import cleaned_up_on_failure
from tfrecord_pipeline.dataset.retention import clean_up
from tfrecord_pipeline.dataset.versions import STAGING, VERSIONS
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.runners.local import convert_here
from tfrecord_pipeline.transforms.progress import UNWATCHED
from tfrecord_pipeline.transforms.storage import fileio

COMMAND = Path(sys.executable).parent / "tfrecord-pipeline"
AT = []  # (audit event, path, action): the action runs once when this process's event hits path


def _at(event: str, args: tuple) -> None:
    """Runs another run's step at an exact point of this one's (as racing processes sometimes
    order them): when an audited operation (sys.addaudithook: shutil.rmtree, os.rename, ...)
    reaches the path given."""
    for hit in [hit for hit in AT if hit[0] == event and args and str(args[0]) == hit[1]]:
        AT.remove(hit)
        hit[2]()


sys.addaudithook(_at)  # for the whole session (a hook cannot be removed); idle while AT is empty


@pytest.fixture
def small(tmp_path) -> Path:
    return write_manifest(tmp_path / "small.csv", make_images(tmp_path, per_class=2))


def _argv(small: Path, root: Path, *flags: str) -> list[str]:
    return ["--manifest", str(small), "--output", str(root), "--no_progress", *flags]


@pytest.mark.parametrize("flags", [[], ["--incremental"]], ids=["full", "incremental"])
def test_a_run_whose_base_another_runs_retention_deleted_is_superseded(tmp_path, small, flags):
    root = tmp_path / "root"
    assert main(["convert", *_argv(small, root, "--num_shards", "2")]) == EXIT_OK
    conversion = prepare(*parse_args(_argv(small, root, "--num_shards", "2", *flags)))
    target = publish.start(str(root))  # the run starts from v1 ...
    assert main(["convert", *_argv(small, root, "--num_shards", "2", "--keep_versions", "1")]) == 0
    other = published(root).name  # ... another publishes v2 and deletes v1
    assert [path.name for path in (root / VERSIONS).iterdir()] == [other]
    said = f"another run published {other} in {root} while this one ran, .* from {other}$"
    with pytest.raises(publish.SupersededError, match=said), cleaned_up_on_failure(target):
        convert_here(conversion, target, UNWATCHED)
    assert [path.name for path in (root / VERSIONS).iterdir()] == [other]
    assert not Path(target.staging).exists() and verify(str(root)) == (8, [])


def test_a_run_whose_folders_the_winners_clean_up_deletes_under_it_is_superseded(tmp_path, small):
    """Run A stages its files, holding no claim on them (pipeline/dataset/claims.py: as if it
    died, or its claim lapsed); B publishes v2 and its clean-up deletes A's staging, so A's move
    fails; while A deletes its own version folder, the winner's clean-up (B's commit retried, or
    a third run's) deletes it too. A ends superseded all the same, and nothing of it is left."""
    root = tmp_path / "root"
    assert main(["convert", *_argv(small, root, "--num_shards", "2")]) == EXIT_OK
    target = publish.start(str(root))  # A numbers v2 ...
    Path(target.staging).mkdir(parents=True)
    Path(target.staging, "staged").write_bytes(b"a shard")
    assert main(["convert", *_argv(small, root, "--num_shards", "2", "--keep_versions", "1")]) == 0
    other, pointer = published(root).name, publish.read_pointer(str(root))[0]  # ... B too
    assert not Path(target.staging).exists()
    AT.append(("shutil.rmtree", target.folder, lambda: clean_up(str(root), pointer, 1)))
    said = f"another run published {other} in {root} while this one ran, .* from {other}$"
    with pytest.raises(publish.SupersededError, match=said), cleaned_up_on_failure(target):
        publish.finalise(target, [("staged", "train-00000-of-00002.tfrecord")])
    assert not AT and [path.name for path in (root / VERSIONS).iterdir()] == [other]
    assert not list((root / STAGING).glob("*")) and verify(str(root)) == (8, [])


def test_in_a_bucket_a_run_whose_staging_the_winners_clean_up_deleted_is_superseded(
    tmp_path, small, gcs, faulty_gcs
):
    """The same on Cloud Storage, where a move is a copy and a delete: A's copy of a staged
    object B's clean-up deleted fails, A ends superseded, and no object of A's is left."""
    faulty_gcs(f"{tmp_path.name}/")  # it answers preconditions as Cloud Storage does
    root = f"gs://tfrp-test/{tmp_path.name}"
    assert main(["convert", *_argv(small, root, "--num_shards", "2")]) == EXIT_OK
    target = publish.start(root)
    fileio.write_bytes(fileio.join(target.staging, "staged"), b"a shard")
    assert main(["convert", *_argv(small, root, "--num_shards", "2", "--keep_versions", "1")]) == 0
    other = publish.read_pointer(root)[0].version
    said = f"another run published {other} in {root} while this one ran, .* from {other}$"
    with pytest.raises(publish.SupersededError, match=said), cleaned_up_on_failure(target):
        publish.finalise(target, [("staged", "train-00000-of-00002.tfrecord")])
    assert fileio.names_in(fileio.join(root, VERSIONS)) == [other]
    assert not fileio.names_in(fileio.join(root, STAGING))
    assert verify(root) == (8, [])


ROUNDS = 6
AT_ONCE = 3


@pytest.mark.slow
def test_racing_runs_with_keep_versions_1_end_published_or_superseded(tmp_path, small):
    """Rounds of runs at once into one root, each deleting every version but its own when it
    publishes: each run publishes (0) or says it lost (4), in one line; never exit 1, 2 or 3."""
    root = tmp_path / "root"
    assert main(["convert", *_argv(small, root, "--num_shards", "2")]) == EXIT_OK
    argv = [COMMAND, "convert", *_argv(small, root, "--num_shards", "2", "--keep_versions", "1")]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    ended = []
    for round_ in range(ROUNDS):
        flags = ["--incremental"] if round_ % 2 else []
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, "env": env}
        runs = [subprocess.Popen([*argv, *flags], **pipes) for _ in range(AT_ONCE)]
        for run in runs:
            out, err = run.communicate(timeout=300)
            ended.append((run.returncode, out, err))
    for status, _, err in ended:
        assert status in (EXIT_OK, EXIT_SUPERSEDED), err
        if status == EXIT_SUPERSEDED:
            (line,) = err.strip().splitlines()
            assert line.startswith("tfrecord-pipeline: failed: another run published v"), line
    assert EXIT_OK in [status for status, _, _ in ended]
    assert [path.name for path in (root / VERSIONS).iterdir()] == [published(root).name]
    assert verify(str(root)) == (8, []) and not list((root / STAGING).glob("*"))
