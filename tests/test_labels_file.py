"""pipeline/dataset/labels_file.py: a version's label names in its labels.txt, checked against
the count and sha256 its metadata holds; a format-1 version's from its metadata."""

import json
from pathlib import Path

import pytest
from conftest import convert_into, make_images, published, write_manifest

from tfrecord_pipeline.cli.main import EXIT_OK, EXIT_USER_ERROR, main
from tfrecord_pipeline.dataset.commit import read_info
from tfrecord_pipeline.dataset.labels_file import label_names
from tfrecord_pipeline.dataset.metadata import INFO_FILE, LABELS_FILE
from tfrecord_pipeline.dataset.versions import (
    MARKER,
    POINTER,
    DatasetError,
    Pointer,
    marker_bytes,
    metadata_digest,
)
from tfrecord_pipeline.read.verify import verify

NAMES = ["astronaut", "chelsea", "coffee", "rocket"]  # make_images' classes, in id order


@pytest.fixture
def rows(tmp_path) -> list[dict]:
    return make_images(tmp_path, per_class=2)


def _as_format_1(root) -> str:
    """Rewrite the version `root` publishes as format 1 wrote it (the names in its metadata),
    with the marker and LATEST a release of that format wrote; returns its folder."""
    folder = published(root)
    info = json.loads((folder / INFO_FILE).read_text())
    labels = info["labels"]
    info["labels"] = {"kind": labels["kind"], "offset": labels["offset"], "names": NAMES}
    info["format_version"] = 1
    data = json.dumps(info, indent=2, sort_keys=True).encode()
    (folder / INFO_FILE).write_bytes(data)
    (folder / MARKER).write_bytes(marker_bytes(data))
    (root / POINTER).write_bytes(Pointer(folder.name, metadata_digest(data)).to_bytes())
    return str(folder)


def test_the_names_are_in_labels_txt_and_the_metadata_describes_the_file(tmp_path, rows):
    folder, info = convert_into(write_manifest(tmp_path / "m.csv", rows), tmp_path / "root")
    assert sorted(info.labels) == ["count", "kind", "offset", "sha256"]
    assert not any(name in (folder / INFO_FILE).read_text() for name in NAMES)
    assert label_names(str(folder), info) == NAMES == (folder / LABELS_FILE).read_text().split()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("chelsea\nastronaut\ncoffee\nrocket\n", f"differs from what {INFO_FILE} describes"),
        (None, "missing"),
    ],
    ids=["two-names-swapped", "gone"],
)
def test_a_labels_txt_other_than_described_is_refused_by_its_readers(
    tmp_path, rows, capsys, text, says
):
    """Two names swapped keep the file's length and line count, and would swap two classes'
    ids in every version a refresh makes from it: a refresh, stats and verify refuse it."""
    manifest = write_manifest(tmp_path / "m.csv", rows)
    folder, info = convert_into(manifest, tmp_path / "root")
    if text is None:
        (folder / LABELS_FILE).unlink()
    else:
        (folder / LABELS_FILE).write_text(text)
    with pytest.raises(DatasetError, match=f"^{folder / LABELS_FILE}: {says}; run verify on "):
        label_names(str(folder), info)
    assert verify(str(folder))[1] == [f"{LABELS_FILE}: {says}"]
    capsys.readouterr()
    refresh = ["convert", "--manifest", str(manifest), "--output", str(tmp_path / "root")]
    assert main([*refresh, "--incremental", "--no_progress"]) == EXIT_USER_ERROR
    assert main(["stats", str(folder), "-o", str(tmp_path / "stats.html")]) == EXIT_USER_ERROR
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and all(f"{LABELS_FILE}: {says}" in line for line in said), said
    assert published(tmp_path / "root") == folder  # nothing published


def test_a_format_1_version_reads_refreshes_and_rolls_back(tmp_path, rows, capsys):
    """A version whose metadata lists its names (written before they moved into labels.txt
    only) is read from that list: verify, stats, a refresh that inherits its ids, a rollback."""
    root = tmp_path / "root"
    convert_into(write_manifest(tmp_path / "m.csv", rows), root)
    old = _as_format_1(root)
    assert label_names(old, read_info(old)) == NAMES and verify(str(root)) == (8, [])
    assert main(["stats", str(root), "-o", str(tmp_path / "stats.html")]) == EXIT_OK
    assert "rocket" in (tmp_path / "stats.html").read_text()
    rows[0]["label"] = "aardvark"  # sorts first, so an id inherited or not tells
    new, info = convert_into(write_manifest(tmp_path / "m.csv", rows), root, "--incremental")
    assert info.refresh and label_names(str(new), info) == [*NAMES, "aardvark"]
    assert verify(str(root)) == (8, [])
    capsys.readouterr()
    assert main(["rollback", str(root), "--to", Path(old).name]) == EXIT_OK
    assert str(published(root)) == old
