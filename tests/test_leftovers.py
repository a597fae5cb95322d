"""Leftovers of killed runs are removed by the next run that publishes and never taken for data:
temporary pointer files (`LATEST.tmp-*`, a kill between the pointer's write and its rename) are
never read as LATEST, and are deleted under the lock, so never while a pointer is being written.
(Killed runs' staging and version folders: tests/test_faults.py.)"""

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_images, published, write_manifest
from test_faults import _complete_new, _ended, _publishing_held, _start

from tfrecord_pipeline.cli.main import EXIT_OK, main
from tfrecord_pipeline.dataset.publish import start
from tfrecord_pipeline.dataset.versions import POINTER, VERSIONS, Pointer
from tfrecord_pipeline.read.verify import verify

COMMAND = Path(sys.executable).parent / "tfrecord-pipeline"


@pytest.fixture
def small(tmp_path) -> Path:
    return write_manifest(tmp_path / "small.csv", make_images(tmp_path, per_class=2))


def _convert(small: Path, root: Path) -> int:
    argv = ["--manifest", str(small), "--output", str(root), "--no_progress", "--num_shards", "2"]
    return main(["convert", *argv])


def test_temporary_pointers_are_never_read_and_the_next_publication_removes_them(tmp_path, small):
    root = tmp_path / "root"
    assert _convert(small, root) == EXIT_OK
    first = published(root).name
    leftovers = {
        f"{POINTER}.tmp-0123456789abcdef": Pointer("v000007-0123abcd", "0" * 64).to_bytes(),
        f"{POINTER}.tmp-fedcba9876543210": b'{"version": "v0000',  # cut short
    }
    for name, data in leftovers.items():
        (root / name).write_bytes(data)
    assert start(str(root)).base.version == first  # never the temporary one
    assert verify(str(root)) == (8, [])
    done = subprocess.run([COMMAND, "verify", root], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _convert(small, root) == EXIT_OK
    assert not list(root.glob(f"{POINTER}.tmp-*"))
    assert published(root).name.startswith("v000002-")  # not after the temporary's v000007


def test_a_pointer_being_written_under_the_lock_is_left_to_its_writer(tmp_path, small):
    """While another process holds the lock (as a pointer's writer does), its temporary file
    stays; a run waiting to publish deletes it once the lock is free and the file is a
    leftover (its writer died, as this test's lock holder leaves it)."""
    root = tmp_path / "root"
    assert _convert(small, root) == EXIT_OK
    versions = {path.name for path in (root / VERSIONS).iterdir()}
    writing = root / f"{POINTER}.tmp-0011223344556677"
    with _publishing_held(root):
        writing.write_bytes(b"being written")
        run = _start(tmp_path, "--manifest", small, "--output", root)
        _complete_new(root, versions, run)  # it waits to publish
        assert writing.read_bytes() == b"being written"
    status, _, err = _ended(run)
    assert status == EXIT_OK, err
    assert not writing.exists() and verify(str(root)) == (8, [])
