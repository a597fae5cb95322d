"""transforms/manifest/trees.py: a class-folder tree read as rows (labels and splits from folder
names; other files skipped)."""

from conftest import command, make_images

from tfrecord_pipeline.transforms.manifest.rows import (
    ManifestRow,
    ReadConfig,
    SkippedFile,
)
from tfrecord_pipeline.transforms.manifest.trees import read_tree


def test_tree_reads_labels_splits_and_skips_other_files(tmp_path):
    for rel in ("train/cat/1.jpg", "train/dog/2.PNG", "validation/cat/3.jpeg", "cat/4.jpg"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    (tmp_path / "train/cat/notes.txt").write_text("hi")
    (tmp_path / "README.md").write_text("hi")
    items = list(read_tree(str(tmp_path), 0, ReadConfig()))
    rows = [(r.key, r.label, r.split) for r in items if isinstance(r, ManifestRow)]
    assert sorted(rows) == [
        ("cat/4.jpg", "cat", "train"),
        ("train/cat/1.jpg", "cat", "train"),
        ("train/dog/2.PNG", "dog", "train"),
        ("validation/cat/3.jpeg", "cat", "validation"),
    ]
    assert sum(isinstance(item, SkippedFile) for item in items) == 2


def test_a_tree_given_as_a_relative_path_has_absolute_image_paths(tmp_path, monkeypatch):
    (tmp_path / "t/cat").mkdir(parents=True)
    (tmp_path / "t/cat/1.jpg").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    (row,) = read_tree("t", 0, ReadConfig())
    assert (row.key, row.image_uri) == ("cat/1.jpg", str(tmp_path / "t/cat/1.jpg"))


def test_a_folder_of_images_without_label_folders_says_which_folder_to_give(tmp_path):
    """--manifest naming one class's folder (images/cat/ for images/) said only that no images
    were found, beside the images it holds."""
    make_images(tmp_path)
    cat = tmp_path / "images" / "astronaut"
    done = command("convert", "--manifest", cat, "--output", tmp_path / "out")
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == (
        f"tfrecord-pipeline: error: {cat}: no images found in <label>/ or <split>/<label>/ "
        "folders, only in the folder itself: give the folder that holds a folder per label, or "
        "a CSV of image_uri,label\n"
    )
    assert command("convert", "--manifest", cat.parent, "--output", tmp_path / "o").returncode == 0
