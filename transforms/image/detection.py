"""Object-detection annotations as a manifest row gives them, parsed and checked.

An annotation is a box and a label (with COCO's `is_crowd` and `area`). Its coordinates are in
one of four forms a row names explicitly (`box_format`), never guessed from their magnitude:
`xywh` (COCO's [x, y, width, height] in pixels), `xyxy` ([xmin, ymin, xmax, ymax] in pixels, as
Pascal VOC), and both again as fractions of the image's width and height (`xywh_normalized`,
`xyxy_normalized`).

A row may also say the size of the image its boxes were drawn on (`width`, `height`): the
file's own pixel grid, or the upright image when the file carries an EXIF rotation
(`placement.py` tells the two apart, and places the boxes on the image as stored).
"""

import math
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import RowError, shown
from tfrecord_pipeline.transforms.errors import bad_annotation as bad
from tfrecord_pipeline.transforms.image import masks

BOX_FORMATS = ("xywh", "xyxy", "xywh_normalized", "xyxy_normalized")
_NUMBER = (int, float)


class Frame(NamedTuple):
    """What a row's box coordinates are measured against (one per row, shared by its boxes)."""

    normalized: bool  # fractions of the image's sides, else pixels
    width: int | None = None  # the image size the boxes were drawn on, when the row says
    height: int | None = None


class Annotation(NamedTuple):
    """One object of a row, as the manifest gives it: a box in its row's frame, xyxy."""

    label: str
    xmin: float
    ymin: float
    xmax: float
    ymax: float
    is_crowd: bool = False
    area: float | None = None  # in pixels of the image the boxes were drawn on, if given
    frame: Frame = Frame(normalized=True)
    text: str = ""  # the label's name, when the label is an id (a COCO category's); else ""
    segmentation: masks.Segmentation | None = None  # with --masks, in the box's frame


def _finite(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, _NUMBER):
        raise bad(f"{what} must be a number, not {shown(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise bad(f"{what} must be finite, not {shown(value)}")
    return number


def _side(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise bad(f"{what} must be a positive integer, not {shown(value)}")
    return value


def row_frame(fields: dict) -> Frame:
    """The frame a row's boxes are in: its `box_format`, and its `width` and `height` (both or
    neither) when it gives them."""
    box_format = fields.get("box_format")
    if box_format not in BOX_FORMATS:
        raise bad(f"box_format must be one of {', '.join(BOX_FORMATS)}, not {shown(box_format)}")
    width, height = fields.get("width"), fields.get("height")
    if (width is None) != (height is None):
        raise bad("width and height go together: give both or neither")
    if width is not None:
        width, height = _side(width, "width"), _side(height, "height")
    return Frame(box_format.endswith("_normalized"), width, height)


def box_corners(box: object, box_format: str, where: str) -> tuple[float, float, float, float]:
    """(xmin, ymin, xmax, ymax) of a box given in `box_format`; a box that is not four finite
    numbers, or whose width or height is negative, is a `bad_annotation`."""
    if not isinstance(box, list | tuple) or len(box) != 4:
        raise bad(f"{where}: a box is a list of 4 numbers, not {shown(box)}")
    a, b, c, d = (_finite(value, f"{where}: a box coordinate") for value in box)
    if box_format.startswith("xywh"):
        if c < 0 or d < 0:
            raise bad(f"{where}: width and height must not be negative, got {shown(box)}")
        return a, b, a + c, b + d
    if c < a or d < b:
        raise bad(f"{where}: xmax and ymax must not be below xmin and ymin, got {shown(box)}")
    return a, b, c, d


def annotation(
    item: object, index: int, box_format: str, frame: Frame, label_of, with_masks: bool = False
) -> Annotation:
    """One object of a JSONL row: {"bbox": [...], "label": text or integer, "is_crowd":
    optional 0/1, "area": optional number, "segmentation": with --masks, COCO's polygons (in
    the box's units) or RLE}. `label_of` checks and shares the label text."""
    where = f"objects[{index}]"
    if not isinstance(item, dict):
        raise bad(f"{where} must be an object, not {shown(item)}")
    label = item.get("label")
    if type(label) is not str and (isinstance(label, bool) or not isinstance(label, int)):
        raise bad(f"{where}: label must be text or an integer, not {shown(label)}")
    try:
        label = label_of(label if type(label) is str else str(label))
    except RowError as error:
        raise bad(f"{where}: {error.message}") from None
    corners = box_corners(item.get("bbox"), box_format, where)
    segmentation = segmentation_of(item, where) if with_masks else None
    return Annotation(
        label,
        *corners,
        _crowd(item.get("is_crowd", 0), where),
        _area(item.get("area"), where),
        frame,
        "",
        segmentation,
    )


def segmentation_of(item: dict, where: str) -> masks.Segmentation:
    """An object's mask with --masks (one it does not have is a `bad_annotation`)."""
    if "segmentation" not in item:
        raise bad(f"{where}: {masks.MISSING}")
    try:
        return masks.parse(item["segmentation"])
    except RowError as error:
        raise bad(f"{where}: {error.message}") from None


def _crowd(value: object, where: str) -> bool:
    if value not in (0, 1) or isinstance(value, float):  # True and False are 1 and 0
        raise bad(f"{where}: is_crowd must be 0 or 1, not {shown(value)}")
    return bool(value)


def _area(value: object, where: str) -> float | None:
    if value is None:
        return None
    area = _finite(value, f"{where}: area")
    if area < 0:
        raise bad(f"{where}: area must not be negative, not {shown(value)}")
    return area


def row_annotations(fields: dict, label_of, with_masks: bool = False) -> tuple[Annotation, ...]:
    """The `objects` of a JSONL row (an empty list: an image with none, a negative)."""
    objects = fields.get("objects")
    if not isinstance(objects, list):
        raise bad(f"objects must be a list, not {shown(objects)}")
    if not objects:
        return ()
    frame = row_frame(fields)
    box_format = fields["box_format"]
    return tuple(
        annotation(item, index, box_format, frame, label_of, with_masks)
        for index, item in enumerate(objects)
    )
