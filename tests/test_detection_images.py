"""Boxes follow the pixels, checked on real pixels: coloured rectangles drawn in an image, the
file written with each EXIF orientation, converted as it is, turned upright and resized; each
placed box must cover its rectangle's colour in the stored image, at the exact coordinates."""

import io

import pytest
from conftest import encode, photo
from detection_data import turned_box
from PIL import Image, ImageDraw

from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.image.detection import Annotation, Frame
from tfrecord_pipeline.transforms.image.images import normalise
from tfrecord_pipeline.transforms.image.placement import Placement, placed

WIDTH, HEIGHT = 240, 160
# (colour, box in pixels of the file's grid: xmin, ymin, xmax, ymax)
RECTANGLES = (((255, 0, 0), (24, 16, 96, 64)), ((0, 0, 255), (144, 80, 216, 144)))


def _file(orientation: int, fmt: str = "JPEG") -> bytes:
    """A photo with the rectangles drawn on its grid, tagged with `orientation`."""
    image = photo("chelsea.png").resize((WIDTH, HEIGHT))
    draw = ImageDraw.Draw(image)
    for colour, box in RECTANGLES:
        draw.rectangle((box[0], box[1], box[2] - 1, box[3] - 1), fill=colour)
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(image, fmt, exif=exif.tobytes(), **({"quality": 95} if fmt == "JPEG" else {}))


def _inside_colour(pixels: Image.Image, box) -> tuple[float, ...]:
    """The mean colour of the middle half of a normalised box in the stored image."""
    x0, y0, x1, y1 = (v * s for v, s in zip(box, (*pixels.size, *pixels.size), strict=True))
    inner = (x0 + (x1 - x0) / 4, y0 + (y1 - y0) / 4, x1 - (x1 - x0) / 4, y1 - (y1 - y0) / 4)
    region = pixels.crop(tuple(round(v) for v in inner))
    colours = list(region.getdata())
    return tuple(sum(channel) / len(colours) for channel in zip(*colours, strict=True))


CONFIGS = {
    "as-is": ImageConfig(),
    "exif-transpose": ImageConfig(exif_transpose=True),
    "resize-short-side": ImageConfig(resize_short_side=80),
    "max-side": ImageConfig(max_side=100, exif_transpose=True),
    "png": ImageConfig(),  # not a JPEG: decoded, so always turned upright
}


@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_boxes_cover_their_rectangles_in_the_stored_image(orientation, name):
    data = _file(orientation, "PNG" if name == "png" else "JPEG")
    stored = normalise(data, CONFIGS[name])
    turned = name != "as-is" or orientation == 1
    assert stored.applied == (orientation if turned else 1)
    assert (stored.source_width, stored.source_height, stored.orientation) == (
        WIDTH,
        HEIGHT,
        orientation,
    )
    placement = Placement.of(stored)
    frame = Frame(False, WIDTH, HEIGHT)
    annotations = [Annotation(str(i), *box, frame=frame) for i, (_, box) in enumerate(RECTANGLES)]
    objects, dropped = placed(annotations, placement)
    assert dropped == 0
    pixels = Image.open(io.BytesIO(stored.data)).convert("RGB")  # EXIF ignored, as TF does
    assert pixels.size == (stored.width, stored.height)
    for item, (colour, box) in zip(objects, RECTANGLES, strict=True):
        normalised = (box[0] / WIDTH, box[1] / HEIGHT, box[2] / WIDTH, box[3] / HEIGHT)
        expected = turned_box(normalised, stored.applied)
        assert item[2:6] == pytest.approx(expected, abs=1e-6)
        inside = _inside_colour(pixels, item[2:6])
        assert all(abs(a - b) < 40 for a, b in zip(inside, colour, strict=True)), inside
        area = (expected[2] - expected[0]) * (expected[3] - expected[1])
        assert item.area == pytest.approx(area * stored.width * stored.height, rel=1e-6)


@pytest.mark.parametrize("orientation", [5, 6, 7, 8])
def test_boxes_drawn_on_the_upright_image_land_on_the_stored_one(orientation):
    """A row whose width and height are the upright image's (sides swapped) had its boxes
    drawn on that image: stored as it is, the boxes go back onto the file's grid."""
    stored = normalise(_file(orientation), ImageConfig())
    assert stored.applied == 1
    placement = Placement(WIDTH, HEIGHT, orientation, 1, stored.width, stored.height)
    upright = []
    for index, (_, box) in enumerate(RECTANGLES):
        turned = turned_box(
            (box[0] / WIDTH, box[1] / HEIGHT, box[2] / WIDTH, box[3] / HEIGHT), orientation
        )
        upright.append(Annotation(str(index), *turned, frame=Frame(True, HEIGHT, WIDTH)))
    objects, _ = placed(upright, placement)
    pixels = Image.open(io.BytesIO(stored.data)).convert("RGB")
    for item, (colour, box) in zip(objects, RECTANGLES, strict=True):
        expected = (box[0] / WIDTH, box[1] / HEIGHT, box[2] / WIDTH, box[3] / HEIGHT)
        assert item[2:6] == pytest.approx(expected, abs=1e-6)
        inside = _inside_colour(pixels, item[2:6])
        assert all(abs(a - b) < 40 for a, b in zip(inside, colour, strict=True)), inside
