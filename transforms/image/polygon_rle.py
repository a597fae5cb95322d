"""Polygons to run-length counts by pycocotools' own rule (`rleFrPoly` in its maskApi.c),
ported here operation for operation, so a mask is the one Google's converter writes for the
same polygon (docs/detection.md says how the two were compared; pycocotools is no dependency).

Pillow's ImageDraw is not used for them: it truncates vertices to whole pixels and fills a
closed outline, so its shapes are a pixel wider and taller than COCO's. The rule, roughly: a
pixel is inside when its centre is, vertices taken to a fifth of a pixel. Each ring is filled
by the even-odd rule (`masks.py` unions the rings of one object).
"""

import math
from collections.abc import Iterator, Sequence

from tfrecord_pipeline.transforms.errors import bad_annotation as bad

_SCALE = 5  # pycocotools draws polygons on a grid five times finer than the pixels'
# Drawing walks an outline step by step, so its length is its cost: an object's rings may be
# this many times as long as the image's own outline (real ones are a fraction of it; a
# coordinate of 1e12 would walk for hours).
MAX_LAPS = 16


def rings_counts(rings: Sequence[Sequence[float]], height: int, width: int) -> Iterator[list[int]]:
    """Each ring's column-major run-length counts on a height x width grid; an outline longer
    than MAX_LAPS times the image's is a `bad_annotation`, before any ring is drawn."""
    vertices = [_fine(ring) for ring in rings]
    if sum(map(_steps, vertices)) > MAX_LAPS * 2 * _SCALE * (width + height):
        raise bad(f"the segmentation's outline is over {MAX_LAPS} times as long as the image's")
    return (polygon_counts(ring, height, width) for ring in vertices)


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
