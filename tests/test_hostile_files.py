"""Rows that would stop, stall or exhaust a run: image paths naming FIFOs, sockets, devices and
folders, files over the size limit, integer labels int64 cannot hold, class-folder trees with
linked, looping and unreadable folders. Each is made for real and must become an error row (or
one usage error for a whole manifest) while the rest of the run converts. (Manifest lines with
NUL and control characters or JSON nested to blow the parser's stack: tests/test_rows.py.)"""

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import (
    PHOTOS,
    RUNNERS,
    encode,
    error_rows,
    make_images,
    photo,
    published,
)

from tfrecord_pipeline.dataset.metadata import INFO_FILE, LABELS_FILE
from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, RowError, UserError
from tfrecord_pipeline.transforms.manifest.labels import check_label, label_map_from_labels
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig, SkippedFile
from tfrecord_pipeline.transforms.manifest.sources import describe
from tfrecord_pipeline.transforms.manifest.trees import read_tree
from tfrecord_pipeline.transforms.storage import disk, fileio

INT64_MIN = -(1 << 63)
SECRET = b"root:$6$hunter2-hash:19000:0:99999:7:::\n"  # a password file, named as an image


class FifoWatch:
    """Notices any process opening the FIFO to read: a writer's non-blocking open succeeds only
    while a reader has it open. Closing at once hands a reader stuck in a blocking read its end
    of file, so a regression fails the test instead of hanging it."""

    def __init__(self, path: Path):
        os.mkfifo(path)
        self.path, self.readers = path, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self._stop.wait(0.005):
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # ENXIO: no reader
                continue
            self.readers += 1

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _unix_socket(path: Path) -> Path:
    """A listening Unix socket at `path` (bound by a relative name: socket paths are short)."""
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        server = socket.socket(socket.AF_UNIX)
        server.bind(path.name)
        server.listen()
    finally:
        os.chdir(cwd)
    return path


def test_only_regular_files_are_opened(tmp_path):
    (tmp_path / "folder.jpg").mkdir()
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    (tmp_path / "link.jpg").symlink_to(tmp_path / "photo.jpg")  # linked images are read
    specials = {
        tmp_path / "fifo.jpg": "a FIFO",
        _unix_socket(tmp_path / "s.jpg"): "a socket",
        Path("/dev/zero"): "a character device",
        Path("/dev/null"): "a character device",
        tmp_path / "folder.jpg": "a folder",
    }
    with FifoWatch(tmp_path / "fifo.jpg") as fifo:
        for path, kind in specials.items():
            with pytest.raises(disk.NotAFileError, match=f"is {kind}, not a regular file"):
                fileio.read_bytes(str(path), 1 << 20)
        assert fileio.read_bytes(str(tmp_path / "link.jpg"), 1 << 20) == b"\xff\xd8\xff"
        (tmp_path / "m.csv").unlink(missing_ok=True)
        os.mkfifo(tmp_path / "m.csv")  # a manifest is a file too: one usage error, no wait
        with pytest.raises(UserError, match="m.csv is a FIFO"):
            describe(str(tmp_path / "m.csv"), 0, ReadConfig())
    assert fifo.readers == 0


def test_integer_labels_outside_int64_are_bad_labels_not_wrapped():
    labels = ["1", "2", str(INT64_MIN), str(1 << 63), "-" + "9" * 25, "7" * 5000, "0" * 30 + "5"]
    label_map = label_map_from_labels(labels)
    assert label_map.integers  # ids stay the integers: one bad label changes no other id
    assert label_map.names == (str(INT64_MIN), "1", "2", "0" * 30 + "5")
    assert [label_map.id_of(label) for label in label_map.names] == [INT64_MIN, 1, 2, 5]
    for label in labels[3:6]:
        with pytest.raises(RowError, match="outside the int64 range") as error:
            label_map.id_of(label)
        assert error.value.reason is Reason.BAD_LABEL and len(str(error.value)) < 120
    assert check_label(" 7 ") == "7"


@pytest.fixture
def hostile_files(tmp_path):
    """A JSONL manifest naming every kind of file that must not be read, and a few good ones;
    returns it and the FIFO it names."""
    rows = make_images(tmp_path, per_class=1)
    for row, label in zip(rows, [1, 2, INT64_MIN, 2], strict=True):
        row["label"] = label  # int64's own limit is a label like any other
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere/photo.jpg").write_bytes(encode(photo("rocket.jpg").resize((64, 64))))
    img = tmp_path / "img"
    img.mkdir()
    (img / "link.jpg").symlink_to(tmp_path / "elsewhere/photo.jpg")
    (img / "folder.jpg").mkdir()
    _unix_socket(img / "s.jpg")
    with open(img / "sparse.jpg", "wb") as handle:
        handle.truncate(1 << 40)  # weighs nothing in the shard estimate either
    (img / "big.jpg").write_bytes((PHOTOS / "retina.jpg").read_bytes())  # 263 KiB
    (img / "secret.jpg").write_bytes(SECRET)
    rows += [
        {"image_uri": "img/link.jpg", "label": 1},
        {"image_uri": "img/fifo.jpg", "label": 1},
        {"image_uri": "img/s.jpg", "label": 1},
        {"image_uri": "/dev/zero", "label": 1},
        {"image_uri": "img/folder.jpg", "label": 1},
        {"image_uri": "img/sparse.jpg", "label": 1},
        {"image_uri": "img/big.jpg", "label": 2},
        {"image_uri": "img/secret.jpg", "label": 2},
        {"image_uri": "img/nul\x00.jpg", "label": 1},
        {"image_uri": "img/link.jpg", "label": "1\x00", "key": "nul-label"},
        {"image_uri": "img/not-read.jpg", "label": 1 << 63, "key": "int64-overflow"},
    ]
    manifest = tmp_path / "m.jsonl"
    lines = [json.dumps(row) for row in rows]
    lines.insert(3, '{"image_uri": "deep.jpg", "label": ' + "[" * 100_000 + "]" * 100_000 + "}")
    manifest.write_text("".join(line + "\n" for line in lines))
    return manifest, img / "fifo.jpg"


def test_files_that_must_not_be_read_are_error_rows(hostile_files, convert):
    manifest, fifo_path = hostile_files
    flags = ("--dedup", "--max_file_mb", "0.1", "--max_error_rate", "1")
    with FifoWatch(fifo_path) as fifo:
        output, info = convert(manifest, *flags)
    assert fifo.readers == 0
    rows = error_rows(output)
    errors = {e["key"]: (e["reason"], e["message"]) for e in rows}
    image = str(manifest.parent / "img")
    deep_offset = sum(len(line) + 1 for line in manifest.read_text().splitlines()[:3])
    assert errors == {
        "img/fifo.jpg": ("not_a_file", f"{image}/fifo.jpg is a FIFO, not a regular file"),
        "img/s.jpg": ("not_a_file", f"{image}/s.jpg is a socket, not a regular file"),
        "/dev/zero": ("not_a_file", "/dev/zero is a character device, not a regular file"),
        "img/folder.jpg": ("not_a_file", f"{image}/folder.jpg is a folder, not a regular file"),
        "img/sparse.jpg": (
            "file_too_large",
            f"{image}/sparse.jpg: 1,099,511,627,776 bytes, over the limit of 104,857 bytes"
            " (--max_file_mb)",
        ),
        "img/big.jpg": (
            "file_too_large",
            f"{image}/big.jpg: 269,564 bytes, over the limit of 104,857 bytes (--max_file_mb)",
        ),
        "img/secret.jpg": ("not_an_image", f"{len(SECRET)} bytes with no image signature"),
        "img/nul\x00.jpg": ("bad_row", "image_uri contains a NUL character"),
        "nul-label": ("bad_label", "label holds control character U+0000"),
        "int64-overflow": (
            "bad_label",
            "integer label '9223372036854775808' is outside the int64 range",
        ),
        f"{manifest}@{deep_offset}": ("bad_row", "JSON nested deeper than 16"),
    }
    text = json.dumps(rows)
    assert "hunter2" not in text and "root:" not in text  # a file's bytes are never echoed
    assert info.records == 5 and info.rows_in == info.records + info.errors == 16
    assert info.labels["names"] == [str(INT64_MIN), "1", "2"]
    assert info.splits["train"].label_counts == {str(INT64_MIN): 1, "1": 2, "2": 2}
    assert len(info.splits["train"].shards) == 1  # the 1 TiB sparse file is not in the estimate


# A child process that lacks root's power over permissions: CAP_DAC_OVERRIDE and
# CAP_DAC_READ_SEARCH are dropped from its bounding set before it runs, so chmod 000 holds.
WITHOUT_OVERRIDE = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


def _without_override(*argv: str) -> subprocess.CompletedProcess:
    command = [*WITHOUT_OVERRIDE, sys.executable, *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def _tree(root: Path) -> Path:
    """A class-folder tree with every kind of folder a walk must not lose or loop on."""
    make_images(root, per_class=2)  # root/images/<label>/{0,1}.jpg
    tree, elsewhere = root / "tree", root / "images"
    (tree / "cat").mkdir(parents=True)
    for name in ("0.jpg", "1.jpg"):
        (tree / "cat" / name).write_bytes((elsewhere / "chelsea" / name).read_bytes())
    (tree / "cat/notes.txt").write_text("not an image")
    (tree / "cat/loop").symlink_to("..")  # a loop: the root again
    (tree / "dog").symlink_to(elsewhere / "coffee")  # a linked class folder: followed
    (tree / "hound").symlink_to(elsewhere / "coffee")  # a second link to it: listed once
    os.mkfifo(tree / "cat/fifo.jpg")
    (tree / "cat/secret.jpg").write_bytes((elsewhere / "rocket/0.jpg").read_bytes())
    (tree / "cat/secret.jpg").chmod(0)
    (tree / "locked").mkdir()
    (tree / "locked/0.jpg").write_bytes((elsewhere / "rocket/1.jpg").read_bytes())
    (tree / "locked").chmod(0)
    (tree / "train/bird/deeper").mkdir(parents=True)  # below <split>/<label>/: never an image
    (tree / "train/bird/deeper/0.jpg").write_bytes((elsewhere / "rocket/1.jpg").read_bytes())
    return tree


def test_tree_walk_follows_links_once_and_reports_every_folder_it_does_not_list(tmp_path):
    tree = _tree(tmp_path)
    items = list(read_tree(str(tree), 0, ReadConfig()))
    rows = sorted(item.key for item in items if isinstance(item, ManifestRow))
    assert rows == [
        "cat/0.jpg",
        "cat/1.jpg",
        "cat/fifo.jpg",
        "cat/secret.jpg",
        "dog/0.jpg",
        "dog/1.jpg",
        "locked/0.jpg",  # root reads what it likes: the child process below cannot
    ]
    errors = {item.key: item.reason for item in items if isinstance(item, ErrorRow)}
    assert errors == {"cat/loop": Reason.DUPLICATE_FOLDER, "hound": Reason.DUPLICATE_FOLDER}
    skipped = sorted(item.path for item in items if isinstance(item, SkippedFile))
    assert skipped == [str(tree / "cat/notes.txt"), str(tree / "train/bird/deeper")]


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_tree_rows_and_errors_add_up_without_root_privileges(tmp_path, runner):
    tree = _tree(tmp_path)
    listing = _without_override("-c", "import os, sys; os.listdir(sys.argv[1])", tree / "locked")
    assert "PermissionError" in listing.stderr  # else this test would prove nothing
    output = tmp_path / "out"
    argv = ["--manifest", tree, "--output", output, "--no_progress", "--max_error_rate", "1"]
    done = _without_override("-m", "tfrecord_pipeline.cli.main", "convert", *argv, *RUNNERS[runner])
    assert done.returncode == 0, done.stderr[-3000:]
    version = published(output)
    errors = error_rows(version)
    again = "(a symlink loop, or a second link to it)"
    assert {e["key"]: (e["reason"], e["message"]) for e in errors} == {
        "cat/fifo.jpg": ("not_a_file", f"{tree}/cat/fifo.jpg is a FIFO, not a regular file"),
        "cat/secret.jpg": (
            "unreadable_file",
            f"cannot read {tree}/cat/secret.jpg: [Errno 13] Permission denied: "
            f"'{tree}/cat/secret.jpg'",
        ),
        "locked": ("unreadable_folder", "cannot list the folder: Permission denied"),
        "cat/loop": ("duplicate_folder", f"already listed as . {again}"),
        "hound": ("duplicate_folder", f"already listed as dog {again}"),
    }
    info = json.loads((version / INFO_FILE).read_text())
    assert (info["records"], info["errors"], info["rows_in"]) == (4, 5, 9)
    assert info["skipped_files"] == 2 and info["labels"]["count"] == 2
    assert (version / LABELS_FILE).read_text() == "cat\ndog\n"
    assert "unreadable_folder: 1" in done.stdout and "unlisted folders): 3" in done.stdout
    # A tree whose root cannot be listed is a mistake about the whole manifest: one line.
    at_root = ["--manifest", tree / "locked", "--output", tmp_path / "out2"]
    root = _without_override(
        "-m", "tfrecord_pipeline.cli.main", "convert", *at_root, *RUNNERS[runner]
    )
    assert root.returncode == 2 and root.stderr == (
        f"tfrecord-pipeline: error: {tree}/locked: cannot list the folder: Permission denied\n"
    )
