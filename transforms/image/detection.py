"""Object-detection annotations: parsed from a manifest row, and placed on the stored image.

An annotation is a box and a label (with COCO's `is_crowd` and `area`). Its coordinates are in
one of four forms a row names explicitly (`box_format`), never guessed from their magnitude:
`xywh` (COCO's [x, y, width, height] in pixels), `xyxy` ([xmin, ymin, xmax, ymax] in pixels, as
Pascal VOC), and both again as fractions of the image's width and height (`xywh_normalized`,
`xyxy_normalized`).

Boxes are drawn on the file's own pixel grid: the grid its bytes store, before any EXIF
rotation, which is what COCO's `width` and `height` describe and what `tf.io.decode_jpeg` gives
for a JPEG stored as it is. A row may say which size that grid was (`width`, `height`): when
the file is that size, the boxes are on its grid; when it carries an EXIF rotation that swaps
its sides and is that size upright, the boxes were drawn on the upright image; any other size
is a `bad_annotation`. The records hold boxes normalised to the image as STORED: resizing keeps
them, and when the converter turns the pixels upright (every image it decodes) the boxes turn
with them (`placed`).
"""

import math
import struct
from collections.abc import Iterable
from typing import NamedTuple

from transforms.errors import RowError, shown
from transforms.errors import bad_annotation as bad
from transforms.image import masks

BOX_FORMATS = ("xywh", "xyxy", "xywh_normalized", "xyxy_normalized")
_NUMBER = (int, float)
# EXIF orientation → how it maps a point (u, v) of the file's grid, normalised, onto the
# upright image: (swap u and v, then u → 1 - u, then v → 1 - v). As Pillow's exif_transpose
# turns the pixels: 6 is ROTATE_270 (a quarter turn clockwise), 8 is ROTATE_90.
_ORIENTATIONS = {
    1: (False, False, False),
    2: (False, True, False),
    3: (False, True, True),
    4: (False, False, True),
    5: (True, False, False),
    6: (True, True, False),
    7: (True, True, True),
    8: (True, False, True),
}
ORIENTATIONS = frozenset(_ORIENTATIONS)
_INVERSE = {6: 8, 8: 6}  # every other orientation undoes itself
TRANSPOSING = frozenset({5, 6, 7, 8})  # orientations that swap width and height


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


class PlacedObject(NamedTuple):
    """An object as its record stores it: a box normalised to the stored image, clipped."""

    label: str
    text: str  # the label's name (the label itself, unless it is a COCO category's id)
    xmin: float
    ymin: float
    xmax: float
    ymax: float
    is_crowd: bool
    area: float  # in pixels of the stored image
    mask: bytes = b""  # with --masks: a PNG of the stored image's size (masks.placed_mask)


class Placement(NamedTuple):
    """How a file's pixels became the stored image: what its boxes must follow."""

    source_width: int  # the file's own pixel grid
    source_height: int
    orientation: int  # the file's EXIF orientation (1: none)
    applied: int  # the orientation the stored pixels were turned by: `orientation` or 1
    width: int  # the stored image
    height: int


def _as_stored(value: float) -> float:
    """A coordinate as the record stores it: float32, which tells fewer boxes apart."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


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


def oriented(box: tuple[float, float, float, float], orientation: int) -> tuple:
    """A normalised (xmin, ymin, xmax, ymax) box as `orientation` turns its image."""
    xmin, ymin, xmax, ymax = box
    swap, flip_x, flip_y = _ORIENTATIONS[orientation]
    if swap:
        xmin, ymin, xmax, ymax = ymin, xmin, ymax, xmax
    if flip_x:
        xmin, xmax = 1 - xmax, 1 - xmin
    if flip_y:
        ymin, ymax = 1 - ymax, 1 - ymin
    return xmin, ymin, xmax, ymax


def drawn_upright(frame: Frame, placement: Placement) -> bool:
    """Whether the boxes were drawn on the upright image rather than the file's grid (told by
    the size the row gives); a size that is neither is a `bad_annotation`."""
    if frame.width is None:
        return False
    given = (frame.width, frame.height)
    grid = (placement.source_width, placement.source_height)
    if given == grid:
        return False
    if placement.orientation in TRANSPOSING and given == grid[::-1]:
        return True
    raise bad(
        f"the boxes are for a {frame.width}x{frame.height} image; the file is {grid[0]}x{grid[1]}"
    )


def annotated_grid(frame: Frame, placement: Placement) -> tuple[int, int, int]:
    """The grid a row's objects were drawn on (width, height), and the orientation that turns
    it as the stored pixels were turned."""
    width, height = placement.source_width, placement.source_height
    if not drawn_upright(frame, placement):
        return width, height, placement.applied
    if placement.applied != 1:
        return height, width, 1
    return height, width, _INVERSE.get(placement.orientation, placement.orientation)


def placed(
    annotations: Iterable[Annotation], placement: Placement
) -> tuple[tuple[PlacedObject, ...], int]:
    """The objects as the stored image has them, and how many were dropped: each box
    normalised, clipped to the image, turned as its pixels were (and its mask, if it has
    one, drawn, turned and resized with them); one left with no area (outside the image, or
    of no width or height once stored as float32) is dropped."""
    kept, dropped = [], 0
    stored_pixels = placement.width * placement.height
    for item in annotations:
        width, height, turn = annotated_grid(item.frame, placement)
        if item.frame.normalized:
            box = (item.xmin, item.ymin, item.xmax, item.ymax)
        else:
            box = (item.xmin / width, item.ymin / height, item.xmax / width, item.ymax / height)
        box = tuple(min(1.0, max(0.0, value)) for value in box)
        box = oriented(box, turn)
        xmin, ymin, xmax, ymax = box
        left, top, right, bottom = map(_as_stored, box)  # narrower than float32 tells: none
        if right <= left or bottom <= top:
            dropped += 1
            continue
        if item.area is None:
            area = (xmax - xmin) * (ymax - ymin) * stored_pixels
        else:
            area = item.area * stored_pixels / (width * height)
        mask = b""
        if item.segmentation is not None:
            grid, stored = (width, height), (placement.width, placement.height)
            normalized = item.frame.normalized
            mask = masks.placed_mask(item.segmentation, normalized, grid, turn, stored)
        text = item.text or item.label
        kept.append(
            PlacedObject(item.label, text, xmin, ymin, xmax, ymax, item.is_crowd, area, mask)
        )
    return tuple(kept), dropped
