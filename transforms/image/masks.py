"""Instance masks (--masks): an object's COCO `segmentation`, parsed, and drawn on its grid.

COCO gives a mask in one of three forms: polygons (a list of rings, each [x1, y1, x2, y2, ...]
in pixels), an uncompressed RLE ({"size": [height, width], "counts": [ints]}) or a compressed
one (the same with `counts` a string). All three become one column-major run-length list, as
pycocotools makes them, and that list becomes the mask's pixels: 1 inside the object, 0
outside (transforms/image/pixels.py `mask_png` turns, resizes and encodes them).

Polygons become run-length lists by pycocotools' own rule (`polygon_rle.py`); each ring is
filled by the even-odd rule, and the rings of one object are unioned.

Parsed segmentations are held until their shard is written, so they are kept compact:
polygon coordinates as arrays of doubles, RLE counts as an array of integers.
"""

import math
from array import array
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import bad_annotation as bad
from tfrecord_pipeline.transforms.errors import shown
from tfrecord_pipeline.transforms.image.polygon_rle import rings_counts

_NUMBER = (int, float)
# With --masks, an object without one is a `bad_annotation`: a record holds a mask for every
# box, and an empty one would teach a model that the object is not there.
MISSING = "no segmentation, and --masks needs one for every object"


class Polygons(NamedTuple):
    """An object's outline: one or more rings of (x, y) coordinates, flattened."""

    rings: tuple[array, ...]  # array("d"): x1, y1, x2, y2, ...


class Rle(NamedTuple):
    """A mask as runs over its pixels in column-major order: 0s, then 1s, then 0s, ..."""

    height: int
    width: int
    counts: array  # array("q")


Segmentation = Polygons | Rle


def parse(value: object) -> Segmentation:
    """An object's `segmentation`, checked; anything else is a `bad_annotation` (its
    message says what is wrong, the caller says where)."""
    if isinstance(value, list):
        return _polygons(value)
    if isinstance(value, dict):
        return _rle(value)
    raise bad(f"segmentation must be a list of polygons or an RLE, not {shown(value)}")


def _polygons(rings: list) -> Polygons:
    """Polygons: each ring an even number of finite numbers. A ring of fewer than 3 points
    encloses no pixel and is left out; an object with no ring left is a `bad_annotation`."""
    kept = []
    for index, ring in enumerate(rings):
        what = f"segmentation[{index}]"
        if not isinstance(ring, list) or len(ring) % 2:
            raise bad(f"{what} must be a list of x, y pairs, not {shown(ring)}")
        for value in ring:
            if isinstance(value, bool) or not isinstance(value, _NUMBER):
                raise bad(f"{what}: a coordinate must be a number, not {shown(value)}")
        coordinates = array("d", ring)
        if not all(map(math.isfinite, coordinates)):
            raise bad(f"{what}: coordinates must be finite")
        if len(coordinates) >= 6:
            kept.append(coordinates)
    if not kept:
        raise bad("segmentation has no polygon of 3 points or more")
    return Polygons(tuple(kept))


def _rle(value: dict) -> Rle:
    size, counts = value.get("size"), value.get("counts")
    if (
        not isinstance(size, list)
        or len(size) != 2
        or not all(type(side) is int and side > 0 for side in size)
    ):
        raise bad(f"an RLE's size is [height, width], not {shown(size)}")
    height, width = size
    if isinstance(counts, str):
        runs = decoded_counts(counts)
    elif isinstance(counts, list) and all(type(count) is int for count in counts):
        runs = array("q", counts)
    else:
        raise bad("an RLE's counts are a list of integers or a string")
    if any(count < 0 for count in runs) or sum(runs) != height * width:
        raise bad("an RLE's counts must be 0 or more and add up to height x width")
    return Rle(height, width, runs)


def decoded_counts(text: str) -> array:
    """The counts of a compressed RLE string (pycocotools' `rleFrString`): each count in
    characters of 5 bits (48 + value; bit 0x20: more follow, 0x10 in the last: negative),
    from the third on as a difference from the count two before it."""
    counts = array("q")
    value = shift = 0
    for char in text:
        code = ord(char) - 48
        if not 0 <= code < 64:
            raise bad(f"{char!r} cannot be in an RLE's counts string")
        value |= (code & 0x1F) << shift
        shift += 5
        if code & 0x20:
            continue
        if code & 0x10:
            value -= 1 << shift
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value)
        value = shift = 0
    if shift:
        raise bad("an RLE's counts string ends inside a count")
    return counts


def mask_bytes(segmentation: Segmentation, width: int, height: int, normalized: bool) -> bytes:
    """The mask on a width x height grid, a byte a pixel (1 inside, 0 outside), column by
    column. Polygons in fractions of the image (`normalized`) are scaled to it first; an RLE
    must be of the grid's size; an outline longer than `polygon_rle.MAX_LAPS` times the image's
    is a `bad_annotation`."""
    if isinstance(segmentation, Rle):
        if (segmentation.height, segmentation.width) != (height, width):
            raise bad(
                f"an RLE mask of {segmentation.width}x{segmentation.height} for an image "
                f"annotated at {width}x{height}"
            )
        return _painted((segmentation.counts,), height * width)
    rings = segmentation.rings
    if normalized:
        rings = tuple(_scaled(ring, width, height) for ring in rings)
    return _painted(rings_counts(rings, height, width), height * width)


def _scaled(ring: array, width: int, height: int) -> array:
    """A ring in fractions of the image, in pixels of a width x height grid."""
    scaled = array("d", ring)
    scaled[0::2] = array("d", (x * width for x in ring[0::2]))
    scaled[1::2] = array("d", (y * height for y in ring[1::2]))
    return scaled


def _painted(all_counts, pixels: int) -> bytes:
    """The union of run-length masks, as bytes: each run of 1s painted in."""
    mask = bytearray(pixels)
    for counts in all_counts:
        position = 0
        for index, run in enumerate(counts):
            if index % 2:
                mask[position : position + run] = b"\x01" * run
            position += run
    return bytes(mask)


def placed_mask(
    segmentation: Segmentation,
    normalized: bool,
    grid: tuple[int, int],
    turn: int,
    stored: tuple[int, int],
) -> bytes:
    """An object's mask as its record stores it: drawn on the `grid` (width, height) its
    annotation is on, turned by the EXIF orientation `turn` as the image's pixels were, and
    resized to the `stored` image's size (transforms/image/pixels.py `mask_png`)."""
    from tfrecord_pipeline.transforms.image import pixels  # Pillow, loaded by the first mask drawn

    column_major = mask_bytes(segmentation, *grid, normalized)
    return pixels.mask_png(column_major, grid, turn, stored)
