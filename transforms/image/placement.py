"""A row's objects placed on the stored image: boxes normalised to it, clipped, and turned as
its pixels were; masks drawn, turned and resized with them.

Boxes are drawn on the file's own pixel grid: the grid its bytes store, before any EXIF
rotation, which is what COCO's `width` and `height` describe and what `tf.io.decode_jpeg` gives
for a JPEG stored as it is. A row may say which size that grid was (`width`, `height`): when
the file is that size, the boxes are on its grid; when it carries an EXIF rotation that swaps
its sides and is that size upright, the boxes were drawn on the upright image; any other size
is a `bad_annotation`. The records hold boxes normalised to the image as STORED: resizing keeps
them, and when the converter turns the pixels upright (every image it decodes) the boxes turn
with them (`placed`).
"""

import struct
from collections.abc import Iterable
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import bad_annotation as bad
from tfrecord_pipeline.transforms.image import masks
from tfrecord_pipeline.transforms.image.config import StoredImage
from tfrecord_pipeline.transforms.image.detection import Annotation, Frame
from tfrecord_pipeline.transforms.image.orientation import TRANSPOSING, oriented

_INVERSE = {6: 8, 8: 6}  # every other orientation undoes itself


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

    @classmethod
    def of(cls, stored: StoredImage) -> "Placement":
        return cls(
            stored.source_width,
            stored.source_height,
            stored.orientation,
            stored.applied,
            stored.width,
            stored.height,
        )


def _as_stored(value: float) -> float:
    """A coordinate as the record stores it: float32, which tells fewer boxes apart."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


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
