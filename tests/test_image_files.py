"""transforms/image/files.py: an image file's bytes, or the reason its row is an error; its
weight in a shard-size estimate."""

import pytest
from conftest import encode, photo

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image.files import read_image, stored_size
from tfrecord_pipeline.transforms.storage import fileio


@pytest.fixture
def image(tmp_path):
    path = tmp_path / "rocket.jpg"
    path.write_bytes(encode(photo("rocket.jpg")))
    return path


def test_an_image_is_read_with_the_identity_a_stat_gives(image):
    data, identity = read_image(str(image), 1 << 20)
    assert data == image.read_bytes()
    assert identity == fileio.identity(str(image))


@pytest.mark.parametrize(
    "name, limit, reason",
    [
        ("missing.jpg", 1 << 20, Reason.MISSING_FILE),
        (".", 1 << 20, Reason.NOT_A_FILE),  # a folder
        ("rocket.jpg", 100, Reason.FILE_TOO_LARGE),
    ],
)
def test_a_file_that_cannot_be_had_is_a_row_error_with_its_reason(image, name, limit, reason):
    with pytest.raises(RowError) as raised:
        read_image(str(image.parent / name), limit)
    assert raised.value.reason == reason


def test_a_file_over_the_limit_weighs_nothing_in_the_plan(image):
    size = image.stat().st_size
    assert stored_size(str(image), size) == size
    assert stored_size(str(image), size - 1) == 0
