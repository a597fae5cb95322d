"""transforms/storage/read_ahead.py: a shard writer's local image files opened a few images
ahead of their read, in order, each read from the descriptor it was opened with and closed by
that read or when dropped unread, so no attempt, finished or abandoned, keeps one open; a file
that cannot be opened ahead is read, and judged, as before."""

import os

import pytest
from conftest import encode, photo

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason
from tfrecord_pipeline.transforms.image.files import local_file, read_image
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, row_position
from tfrecord_pipeline.transforms.plan.sharding import ShardId
from tfrecord_pipeline.transforms.storage import disk
from tfrecord_pipeline.transforms.storage.read_ahead import (
    READ_AHEAD,
    Opened,
    open_ahead,
    read_ahead,
)
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig, write_shard


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def images(tmp_path) -> list:
    data = encode(photo().resize((32, 32)))
    paths = []
    for number in range(40):
        path = tmp_path / f"{number:02d}.jpg"
        path.write_bytes(data)
        paths.append(path)
    return paths


def _rows(paths, label="cat") -> list[ManifestRow]:
    return [
        ManifestRow(f"k{n}", str(path), label, "train", (), "m", row_position(0, n))
        for n, path in enumerate(paths)
    ]


def test_each_local_file_is_opened_depth_pairs_before_it_is_given():
    asked = []
    pairs = [(f"item{n}", None) for n in range(10)] + [("read", b"bytes already")]

    def local_path(item):
        asked.append(item)
        return None  # nothing to open: the pair goes on as it came

    given = []
    for pair in read_ahead(pairs, local_path, depth=3):
        given.append(pair)
        assert len(asked) == min(len(given) + 3, 10)  # asked ahead of what was given
    assert given == pairs  # in order, the pair with its bytes never asked about


def test_a_file_opened_ahead_reads_as_a_read_of_it_and_closes(images):
    before = _open_fds()
    opened = open_ahead(str(images[0]))
    assert type(opened) is Opened and _open_fds() == before + 1
    assert opened.read(str(images[0]), 1 << 20) == disk.read(str(images[0]), 1 << 20)
    assert _open_fds() == before
    del opened  # read already: nothing left to close
    assert _open_fds() == before


def test_a_file_that_cannot_be_opened_ahead_is_read_and_judged_as_before(tmp_path):
    os.mkfifo(tmp_path / "fifo.jpg")  # opened, a FIFO without a writer would wait for ever
    for name in ("missing.jpg", "fifo.jpg", "."):
        assert open_ahead(str(tmp_path / name)) is None
    with pytest.raises(Exception) as raised:
        read_image(str(tmp_path / "fifo.jpg"), 1 << 20)
    assert raised.value.reason == Reason.NOT_A_FILE


def test_only_a_rows_loose_local_file_is_opened_ahead(tmp_path):
    (row,) = _rows([tmp_path / "a.jpg"])
    assert local_file(row) == str(tmp_path / "a.jpg")
    assert local_file(row._replace(image="gs://bucket/a.jpg")) is None
    assert local_file(row._replace(image=f"{tmp_path}/a.tar#b.jpg")) is None  # a member
    assert local_file(ErrorRow("k", "m@0", Reason.MISSING_FILE, "no such file")) is None


def test_rows_failing_before_their_read_leave_no_file_open(images):
    before = _open_fds()
    rows = _rows(images, label="dog")  # not in the label map: failed before the image is read
    *errors, result = write_shard(ShardId("train", 0, 1), rows, LabelMap(("cat",)), _config(images))
    assert result.records == 0 and len(errors) == len(rows)
    assert _open_fds() == before


def test_an_attempt_abandoned_midway_leaves_no_file_open(images):
    before = _open_fds()
    rows = [row._replace(label="dog") if n % 2 else row for n, row in enumerate(_rows(images))]
    shard = write_shard(ShardId("train", 0, 1), rows, LabelMap(("cat",)), _config(images))
    assert type(next(shard)) is ErrorRow  # a few rows in, the files ahead of them opened
    assert _open_fds() > before + READ_AHEAD  # and the staged shard's
    shard.close()  # as a failed or cancelled attempt's writer is dropped
    assert _open_fds() == before


def test_a_shard_read_ahead_holds_what_it_held_before(images):
    rows = _rows(images)
    *_, result = write_shard(ShardId("train", 0, 1), rows, LabelMap(("cat",)), _config(images))
    records = (images[0].parent / "staging" / result.staged).read_bytes()
    assert result.records == len(rows) and records.count(images[0].read_bytes()) == len(rows)


def _config(images) -> WriteConfig:
    return WriteConfig(str(images[0].parent / "staging"), sync=False)
