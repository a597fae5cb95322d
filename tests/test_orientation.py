"""transforms/image/orientation.py: how each EXIF orientation turns a normalised box (where a
point lands on the upright image, and boxes placed with it: test_placement.py)."""

import pytest

from tfrecord_pipeline.transforms.image.orientation import (
    ORIENTATIONS,
    TRANSPOSING,
    is_upright,
    oriented,
)

BOX = (0.1, 0.2, 0.4, 0.3)  # wider than tall, off every axis of symmetry
_UNDONE_BY = {6: 8, 8: 6}  # every other orientation undoes itself


@pytest.mark.parametrize("orientation", sorted(ORIENTATIONS))
def test_a_turned_box_keeps_its_corners_in_order_and_its_sides_or_swaps_them(orientation):
    xmin, ymin, xmax, ymax = oriented(BOX, orientation)
    assert xmin < xmax and ymin < ymax
    sides = pytest.approx((xmax - xmin, ymax - ymin))
    assert sides == ((0.1, 0.3) if orientation in TRANSPOSING else (0.3, 0.1))


@pytest.mark.parametrize("orientation", sorted(ORIENTATIONS))
def test_the_inverse_orientation_turns_a_box_back(orientation):
    inverse = _UNDONE_BY.get(orientation, orientation)
    assert oriented(oriented(BOX, orientation), inverse) == pytest.approx(BOX)


def test_only_no_orientation_or_1_is_upright():
    assert is_upright(None) and is_upright(1)
    assert not any(is_upright(orientation) for orientation in ORIENTATIONS - {1})
    assert oriented(BOX, 1) == BOX
