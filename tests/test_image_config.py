"""transforms/image/config.py: the size a resize asks for, and the limits checked from a header
before anything is decoded."""

import pytest

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image.config import (
    ImageConfig,
    check_decode_bytes,
    check_pixels,
    scale_for,
    scaled_size,
)


@pytest.mark.parametrize(
    "config, scale",
    [
        (ImageConfig(), 1.0),
        (ImageConfig(resize_short_side=300), 0.5),  # the short side, 600, to 300
        (ImageConfig(max_side=400), 0.5),  # the long side, 800, to 400
        (ImageConfig(resize_short_side=300, max_side=200), 0.25),  # the smaller scale wins
        (ImageConfig(resize_short_side=1200, max_side=1600), 1.0),  # never upscaled
    ],
)
def test_the_scale_is_the_smallest_the_resize_options_ask_for_and_never_above_1(config, scale):
    assert scale_for(800, 600, config) == scale == scale_for(600, 800, config)


def test_a_scaled_size_rounds_each_side_and_keeps_at_least_a_pixel():
    assert scaled_size(800, 600, 0.5) == (400, 300)
    assert scaled_size(333, 101, 0.3) == (100, 30)  # rounded to the nearest, not cut
    assert scaled_size(10000, 3, 0.01) == (100, 1)


def test_limits_are_inclusive_and_the_refusal_says_by_how_much():
    config = ImageConfig(max_pixels=100, max_decode_bytes=3 << 20)
    check_pixels(10, 10, config)
    check_decode_bytes(10, 10, 3 << 20, config)
    with pytest.raises(RowError, match=r"^11x10 is over the limit of 100 pixels$") as raised:
        check_pixels(11, 10, config)
    assert raised.value.reason is Reason.IMAGE_TOO_LARGE
    with pytest.raises(RowError, match=r"^9x9 needs 4 MB to decode, over the limit of 3 MB$"):
        check_decode_bytes(9, 9, 4 << 20, config)
