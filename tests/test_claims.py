"""pipeline/dataset/claims.py: a live run's folders outlive another run's clean-up, on a local
disk and in a bucket, and the live run is told at its own publication that it lost, to a
version that was published; a run that died leaves a claim the next clean-up finds gone."""

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import make_images, write_manifest

from tfrecord_pipeline.cli.main import EXIT_OK, main
from tfrecord_pipeline.dataset import claims, publish
from tfrecord_pipeline.dataset.commit import cleaned_up_on_failure
from tfrecord_pipeline.dataset.versions import MARKER, STAGING, VERSIONS, Pointer
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.transforms.storage import fileio


@pytest.fixture(params=["disk", "bucket"])
def root(request, tmp_path) -> str:
    if request.param == "disk":
        return str(tmp_path / "root")
    request.getfixturevalue("faulty_gcs")(f"{tmp_path.name}/")  # preconditions as GCS has them
    return f"gs://tfrp-test/{tmp_path.name}/root"


def _convert(tmp_path, root: str, *flags: str) -> str:
    manifest = tmp_path / "m.csv"
    if not manifest.exists():
        write_manifest(manifest, make_images(tmp_path, per_class=2))
    argv = ["convert", "--manifest", str(manifest), "--output", root, "--no_progress"]
    assert main([*argv, "--num_shards", "2", *flags]) == EXIT_OK
    return publish.read_pointer(root)[0].version


def _staged(run: publish.Target) -> list[str]:
    """A staged file and a file in the version folder, as a run moving its files in has."""
    paths = [fileio.join(run.staging, "train.staged"), fileio.join(run.folder, "moved")]
    for path in paths:
        fileio.write_bytes(path, b"bytes")
    return paths


def test_a_live_runs_folders_outlive_a_clean_up_and_it_loses_at_its_publication(tmp_path, root):
    _convert(tmp_path, root)
    run = publish.start(root)
    with claims.claimed(root, run.version):
        paths = _staged(run)
        other = _convert(tmp_path, root, "--keep_versions", "1")  # its clean-up comes now
        assert all(map(fileio.exists, paths)) and claims.is_live(root, run.version)
        said = f"another run published {other} in "
        with pytest.raises(publish.SupersededError, match=said), cleaned_up_on_failure(run):
            fileio.write_bytes(fileio.join(run.folder, MARKER), b"{}")
            publish.publish(run, Pointer(run.version, "1" * 64))
    assert not any(map(fileio.exists, paths))
    assert fileio.names_in(fileio.join(root, VERSIONS)) == [other]
    assert not fileio.names_in(fileio.join(root, STAGING)) and verify(root) == (8, [])


# A run's start and its claim, its files staged, then its death (SIGKILL).
_DYING = (
    "import os, signal, sys\n"
    "from tfrecord_pipeline.dataset import claims, publish\n"
    "from tfrecord_pipeline.transforms.storage import fileio\n"
    "run = publish.start(sys.argv[1])\n"
    "with claims.claimed(run.root, run.version):\n"
    "    fileio.write_bytes(fileio.join(run.staging, 'train.staged'), b'bytes')\n"
    "    print(run.version, flush=True)\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
)


def test_a_dead_runs_folders_and_claim_go_with_the_next_clean_up(tmp_path, root):
    _convert(tmp_path, root)
    env = {**os.environ, "TFRECORD_PIPELINE_LEASE_SECONDS": "1"}
    died = subprocess.run(
        [sys.executable, "-c", _DYING, root], env=env, capture_output=True, text=True
    )
    assert died.returncode == -signal.SIGKILL, died.stderr
    version = died.stdout.strip()
    assert fileio.exists(claims.claim_path(root, version))
    while claims.is_live(root, version):  # a lease lasts its second after its last renewal
        time.sleep(0.2)
    _convert(tmp_path, root)
    assert not fileio.names_in(fileio.join(root, STAGING))
