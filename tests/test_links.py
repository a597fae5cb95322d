"""Nothing outside the dataset root is ever touched, whatever links the root holds: a link where
the layout has a folder or the pointer is refused in one line (exit 2) and everything stays as it
was, on both sides of the link; a clean-up never follows one; and a folder is a dataset only by
its own layout (`LATEST`, `versions/`), never by a bare `_staging/`. Real links, real runs."""

import os
from pathlib import Path

import pytest
from conftest import make_images, published, write_manifest

from tfrecord_pipeline.cli.main import EXIT_USER_ERROR, main
from tfrecord_pipeline.dataset.publish import discard, read_pointer, start
from tfrecord_pipeline.dataset.retention import clean_up
from tfrecord_pipeline.dataset.versions import LOCK, POINTER, PUBLISHED, STAGING, VERSIONS
from tfrecord_pipeline.read.verify import verify


@pytest.fixture
def small(tmp_path) -> Path:
    return write_manifest(tmp_path / "small.csv", make_images(tmp_path, per_class=2))


def _convert(small: Path, root: Path, *flags: str) -> int:
    argv = ["convert", "--manifest", str(small), "--output", str(root), "--no_progress", *flags]
    return main(argv)


def _everything(folder: Path) -> dict[str, object]:
    """Every entry under `folder`, links not followed: a file's bytes, a link's target."""
    found = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_file():
            found[name] = path.read_bytes()
        else:
            found[name] = "folder"
    return found


def _dataset(tmp_path: Path, small: Path, name: str, runs: int = 1) -> Path:
    root = tmp_path / name
    for _ in range(runs):
        assert _convert(small, root, "--num_shards", "2") == 0
    return root


def _link_versions(root: Path, other: Path) -> None:
    (root / VERSIONS).rename(root.parent / "versions-moved")
    (root / VERSIONS).symlink_to(other / VERSIONS)


def _link_staging(root: Path, other: Path) -> None:
    (root / STAGING).rmdir()
    (root / STAGING).symlink_to(other)


def _link_a_version(root: Path, other: Path) -> None:
    name = published(other).name
    (root / VERSIONS / name).symlink_to(published(other))


def _link_pointer(root: Path, other: Path) -> None:
    (root / POINTER).unlink()
    (root / POINTER).symlink_to(other / POINTER)


def _link_records(root: Path, other: Path) -> None:
    for record in (root / PUBLISHED).iterdir():
        record.unlink()
    (root / PUBLISHED).rmdir()
    (root / PUBLISHED).symlink_to(other)


def _link_lock_nowhere(root: Path, other: Path) -> None:
    (root / LOCK).unlink(missing_ok=True)
    (root / LOCK).symlink_to(other / "made-by-a-run")


@pytest.mark.parametrize(
    "plant, says",
    [
        (_link_versions, f"/{VERSIONS} is a symbolic link"),
        (_link_staging, f"/{STAGING} is a symbolic link"),
        (_link_a_version, "is a symbolic link: a dataset's layout holds none"),
        (_link_pointer, f"/{POINTER} is a symbolic link"),
        (_link_records, f"/{PUBLISHED} is a symbolic link"),
        (_link_lock_nowhere, f"/{LOCK} is a symbolic link that leads nowhere"),
    ],
    ids=["versions", "staging", "a-version", "pointer", "records", "lock"],
)
def test_a_link_in_the_layout_is_refused_and_nothing_on_either_side_changes(
    tmp_path, small, capsys, plant, says
):
    other = _dataset(tmp_path, small, "other", runs=2)
    (other / STAGING / "keep-me").mkdir(parents=True)  # a user's folder, if _staging links here
    (other / STAGING / "keep-me" / "notes.txt").write_text("mine")
    root = _dataset(tmp_path, small, "root")
    plant(root, other)
    before = {"root": _everything(root), "other": _everything(other)}
    capsys.readouterr()
    for flags in ([], ["--keep_versions", "1"], ["--incremental", "--keep_versions", "1"]):
        assert _convert(small, root, *flags) == EXIT_USER_ERROR
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("tfrecord-pipeline: error: ") and says in line, line
        assert main(["rollback", str(root), "--to", "1"]) == EXIT_USER_ERROR
        capsys.readouterr()
    assert {"root": _everything(root), "other": _everything(other)} == before
    assert verify(str(other)) == (8, [])


def test_a_clean_up_never_follows_a_link_planted_after_the_run_started(tmp_path, small):
    """Links that appear after a run's checks (here: before its clean-up) lead nowhere: every
    deletion checks each name below the root with lstat and leaves a link where it is."""
    other = _dataset(tmp_path, small, "other", runs=2)
    theirs = tmp_path / "theirs"
    (theirs / "sub").mkdir(parents=True)
    (theirs / "sub" / "file").write_text("mine")
    root = _dataset(tmp_path, small, "root", runs=3)
    pointer, _ = read_pointer(str(root))
    oldest = sorted((root / VERSIONS).iterdir())[0]
    oldest.rename(tmp_path / "moved-away")
    oldest.symlink_to(published(other))  # a version folder that is a link
    (root / STAGING / "v000001-0123abcd").symlink_to(theirs)  # a staging folder that is one
    before = {"other": _everything(other), "theirs": _everything(theirs)}
    clean_up(str(root), pointer, keep_versions=1)
    assert {"other": _everything(other), "theirs": _everything(theirs)} == before
    assert oldest.is_symlink() and (root / STAGING / "v000001-0123abcd").is_symlink()
    assert {p.name for p in (root / VERSIONS).iterdir()} == {oldest.name, pointer.version}
    assert verify(str(other)) == (8, []) and verify(str(root)) == (8, [])


def test_a_folder_holding_only_a_staging_folder_is_no_dataset_and_is_left_as_it_is(
    tmp_path, small, capsys
):
    folder = tmp_path / "theirs"
    for name in ("v000001-0123abcd", "photos"):
        (folder / STAGING / name).mkdir(parents=True)
        (folder / STAGING / name / "file").write_text("mine")
    before = _everything(folder)
    assert _convert(small, folder) == EXIT_USER_ERROR
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"is not a tfrecord-pipeline dataset: it holds {STAGING} but no {POINTER}" in line
    assert _everything(folder) == before


def test_a_first_run_lays_out_its_dataset_before_staging_anything(tmp_path, small):
    """So a first run killed early leaves a folder its rerun takes for the dataset it is."""
    root = tmp_path / "root"
    killed = start(str(root))
    assert (root / VERSIONS).is_dir()
    Path(killed.staging).mkdir(parents=True)  # as the killed run left it
    assert _convert(small, root, "--num_shards", "2") == 0
    assert not Path(killed.staging).exists() and verify(str(root)) == (8, [])


def test_a_link_inside_a_runs_own_folders_is_removed_never_followed(tmp_path):
    theirs = tmp_path / "theirs"
    (theirs / "sub").mkdir(parents=True)
    (theirs / "sub" / "file").write_text("mine")
    target = start(str(tmp_path / "root"))
    for folder in (Path(target.staging), Path(target.folder)):
        folder.mkdir(parents=True)
        (folder / "link").symlink_to(theirs)
    before = _everything(theirs)
    discard(target)
    assert not Path(target.staging).exists() and not Path(target.folder).exists()
    assert _everything(theirs) == before
