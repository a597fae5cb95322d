"""Instance masks (--masks): an object's COCO `segmentation`, parsed, and drawn on its grid.

COCO gives a mask in one of three forms: polygons (a list of rings, each [x1, y1, x2, y2, ...]
in pixels), an uncompressed RLE ({"size": [height, width], "counts": [ints]}) or a compressed
one (the same with `counts` a string). All three become one column-major run-length list, as
pycocotools makes them, and that list becomes the mask's pixels: 1 inside the object, 0
outside (transforms/image/pixels.py `mask_png` turns, resizes and encodes them).

Polygons are rasterised by pycocotools' own rule (`rleFrPoly` in its maskApi.c), ported
here operation for operation, so a mask is the one Google's converter writes for the same
polygon (the README says how the two were compared; pycocotools is no dependency). Pillow's
ImageDraw is not used for them: it truncates vertices to whole pixels and fills a closed
outline, so its shapes are a pixel wider and taller than COCO's. The rule, roughly: a pixel
is inside when its centre is, vertices taken to a fifth of a pixel. Each ring is filled by
the even-odd rule, and the rings of one object are unioned.

Parsed segmentations are held until their shard is written, so they are kept compact:
polygon coordinates as arrays of doubles, RLE counts as an array of integers.
"""

import math
from array import array
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from transforms.errors import bad_annotation as bad
from transforms.errors import shown

_SCALE = 5  # pycocotools draws polygons on a grid five times finer than the pixels'
# Drawing walks an outline step by step, so its length is its cost: an object's rings may be
# this many times as long as the image's own outline (real ones are a fraction of it; a
# coordinate of 1e12 would walk for hours).
MAX_LAPS = 16
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


def polygon_counts(vertices: tuple[list, list], height: int, width: int) -> list[int]:
    """A ring's column-major run-length counts on a height x width grid, as pycocotools'
    `rleFrPoly` makes them from its `vertices` on the finer grid (`_fine`): the outline
    walked, the points where it crosses a column of pixel centres kept (clamped to the
    image), and each of them toggling inside and outside from there down the column."""
    crossings = sorted(x * height + y for x, y in _column_crossings(vertices, height, width))
    runs, previous = [], 0
    for position in (*crossings, height * width):
        runs.append(position - previous)
        previous = position
    # Two toggles at one pixel cancel: a run of nothing after the first adds the run after it
    # to the one before it.
    remaining = iter(runs)
    counts = [next(remaining)]
    for run in remaining:
        if run > 0:
            counts.append(run)
        else:
            counts[-1] += next(remaining, 0)
    return counts


def _fine(ring: Sequence[float]) -> tuple[list[int], list[int]]:
    """A ring's vertices on the finer grid (x's, y's), the first again at the end."""
    points = len(ring) // 2
    xs = [int(_SCALE * ring[2 * j] + 0.5) for j in range(points)]
    ys = [int(_SCALE * ring[2 * j + 1] + 0.5) for j in range(points)]
    return xs + xs[:1], ys + ys[:1]


def _steps(vertices: tuple[list, list]) -> int:
    """How many points walking the ring's outline visits (`_outline`)."""
    xs, ys = vertices
    return sum(max(abs(xs[j + 1] - xs[j]), abs(ys[j + 1] - ys[j])) + 1 for j in range(len(xs) - 1))


def _outline(vertices: tuple[list, list]) -> Iterator[tuple[int, int]]:
    """The ring's outline as points of the finer grid, edge after edge, each edge's points
    from its start to its end one step apart along its longer side."""
    xs, ys = vertices
    for j in range(len(xs) - 1):
        x0, x1, y0, y1 = xs[j], xs[j + 1], ys[j], ys[j + 1]
        dx, dy = abs(x1 - x0), abs(y0 - y1)
        flip = (dx >= dy and x0 > x1) or (dx < dy and y0 > y1)
        if flip:
            x0, x1, y0, y1 = x1, x0, y1, y0
        if dx >= dy:
            slope = (y1 - y0) / dx if dx else 0.0
            for step in range(dx + 1):
                t = dx - step if flip else step
                yield t + x0, int(y0 + slope * t + 0.5)
        else:
            slope = (x1 - x0) / dy
            for step in range(dy + 1):
                t = dy - step if flip else step
                yield int(x0 + slope * t + 0.5), t + y0


def _column_crossings(vertices: tuple, height: int, width: int) -> Iterator[tuple]:
    """(column, row) where the outline passes a column of pixel centres: the first pixel of
    that column below the outline."""
    previous = None
    for u, v in _outline(vertices):
        if previous is not None and u != previous[0]:
            column = ((u if u < previous[0] else u - 1) + 0.5) / _SCALE - 0.5
            if math.floor(column) == column and 0 <= column <= width - 1:
                row = (min(v, previous[1]) + 0.5) / _SCALE - 0.5
                yield int(column), math.ceil(min(max(row, 0), height))
        previous = u, v


def mask_bytes(segmentation: Segmentation, width: int, height: int, normalized: bool) -> bytes:
    """The mask on a width x height grid, a byte a pixel (1 inside, 0 outside), column by
    column. Polygons in fractions of the image (`normalized`) are scaled to it first; an RLE
    must be of the grid's size; an outline longer than MAX_LAPS times the image's is a
    `bad_annotation`."""
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
    vertices = [_fine(ring) for ring in rings]
    if sum(map(_steps, vertices)) > MAX_LAPS * 2 * _SCALE * (width + height):
        raise bad(f"the segmentation's outline is over {MAX_LAPS} times as long as the image's")
    return _painted((polygon_counts(ring, height, width) for ring in vertices), height * width)


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
    from transforms.image.images import pixels

    column_major = mask_bytes(segmentation, *grid, normalized)
    return pixels().mask_png(column_major, grid, turn, stored)
