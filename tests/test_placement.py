"""Boxes placed on the stored image: normalised to it, clipped, turned with its pixels, and
degenerate ones (even once stored as float32) dropped."""

import struct

import pytest

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image.detection import Annotation, Frame
from tfrecord_pipeline.transforms.image.orientation import oriented
from tfrecord_pipeline.transforms.image.placement import Placement, placed


def _upright(w, h, orientation=1, applied=None, stored=None):
    applied = orientation if applied is None else applied
    sw, sh = (h, w) if applied in (5, 6, 7, 8) else (w, h)
    return Placement(w, h, orientation, applied, *(stored or (sw, sh)))


def test_pixel_boxes_are_normalised_clipped_and_degenerate_ones_dropped():
    frame = Frame(False)
    boxes = [
        Annotation("a", 10, 20, 60, 120, frame=frame),  # inside
        Annotation("b", -10, 150, 300, 300, frame=frame),  # clipped to the image
        Annotation("c", 250, 0, 260, 50, frame=frame),  # wholly outside: no area left
        Annotation("d", 10, 10, 10, 50, frame=frame),
    ]
    kept, dropped = placed(boxes, _upright(200, 200))
    assert dropped == 2 and [o.label for o in kept] == ["a", "b"]
    assert kept[0][2:6] == (0.05, 0.1, 0.3, 0.6)
    assert kept[1][2:6] == (0.0, 0.75, 1.0, 1.0)
    assert kept[0].area == pytest.approx(50 * 100)  # no area given: the box's, stored pixels


def test_resizing_keeps_normalised_boxes_and_scales_a_given_area():
    frame = Frame(False, 200, 100)
    (item,) = placed(
        [Annotation("a", 20, 10, 120, 60, area=1000.0, frame=frame)],
        Placement(200, 100, 1, 1, 50, 25),
    )[0]
    assert item[2:6] == (0.1, 0.1, 0.6, 0.6)
    assert item.area == pytest.approx(1000 / 16)


# Where the point (0.1, 0.2) of a file's grid lands on the upright image, as Pillow's
# exif_transpose moves pixels (tests/test_detection_images.py checks it with real pixels).
_TURNED = {
    1: (0.1, 0.2),
    2: (0.9, 0.2),
    3: (0.9, 0.8),
    4: (0.1, 0.8),
    5: (0.2, 0.1),
    6: (0.8, 0.1),
    7: (0.8, 0.9),
    8: (0.2, 0.9),
}


@pytest.mark.parametrize("orientation", range(1, 9))
def test_boxes_turn_with_the_pixels(orientation):
    x, y = _TURNED[orientation]
    box = oriented((0.1, 0.2, 0.1, 0.2), orientation)
    assert box == pytest.approx((x, y, x, y))
    if orientation not in (5, 6, 7, 8):
        return  # an upright image of the file's size: the boxes are on the file's grid
    # Boxes drawn on the upright image (told by its swapped size), stored unturned, go back
    # to the file's grid.
    frame = Frame(True, 100, 200)
    upright = Annotation("a", x - 0.05, y - 0.05, x + 0.05, y + 0.05, frame=frame)
    (back,), _ = placed([upright], Placement(200, 100, orientation, 1, 200, 100))
    assert back[2:6] == pytest.approx((0.05, 0.15, 0.15, 0.25))
    # ... and stay as they are when the pixels were turned upright.
    (kept,), _ = placed([upright], _upright(200, 100, orientation))
    assert kept[2:6] == pytest.approx(upright[1:5])


def test_boxes_for_an_image_of_another_size_are_a_bad_annotation():
    item = Annotation("a", 1, 1, 5, 5, frame=Frame(False, 640, 480))
    with pytest.raises(RowError, match="for a 640x480 image; the file is 320x240") as raised:
        placed([item], _upright(320, 240))
    assert raised.value.reason is Reason.BAD_ANNOTATION
    with pytest.raises(RowError):  # swapped sides are only the upright image's when rotated
        placed([item._replace(frame=Frame(False, 240, 320))], _upright(320, 240, 3))


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def test_a_box_that_float32_cannot_tell_from_a_line_is_dropped_not_stored():
    # 1e-12 pixels wide: distinct in float64, one value once the record stores it as float32.
    tiny = Annotation("a", 1.0, 1.0, 1.0 + 1e-12, 1.0 + 1e-12, frame=Frame(False))
    kept, dropped = placed([tiny], Placement(149, 139, 1, 1, 149, 139))
    assert dropped == 1, [(_float32(o.xmin), _float32(o.xmax)) for o in kept]
