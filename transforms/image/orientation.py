"""EXIF orientations: the eight there are, and how each turns an image and the boxes on it.

Shared by the paths that turn the pixels (Pillow's, `pixels.py`; libjpeg-turbo's, `fastpath.py`,
with NumPy) and the placement of boxes (`placement.py`, which turns them with the pixels), so
that none imports another.
"""

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
TRANSPOSING = frozenset({5, 6, 7, 8})  # orientations that swap width and height


def is_upright(orientation: int | None) -> bool:
    """An EXIF orientation that needs no rotation or flip (absent, or 1)."""
    return orientation in (None, 1)


def turn_steps(orientation: int) -> tuple[bool, bool, bool]:
    """How `orientation` turns an image, in order: (swap rows and columns, flip left-right,
    flip top-bottom)."""
    return _ORIENTATIONS[orientation]


def oriented(box: tuple[float, float, float, float], orientation: int) -> tuple:
    """A normalised (xmin, ymin, xmax, ymax) box as `orientation` turns its image."""
    xmin, ymin, xmax, ymax = box
    swap, flip_x, flip_y = turn_steps(orientation)
    if swap:
        xmin, ymin, xmax, ymax = ymin, xmin, ymax, xmax
    if flip_x:
        xmin, xmax = 1 - xmax, 1 - xmin
    if flip_y:
        ymin, ymax = 1 - ymax, 1 - ymin
    return xmin, ymin, xmax, ymax
