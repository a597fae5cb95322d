"""Split names and the deterministic `--split train=0.9,validation=0.1` assignment."""

import re
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import Reason, RowError, UserError
from tfrecord_pipeline.transforms.keys import SPLIT_SALT, unit_interval

DEFAULT_SPLIT = "train"
_SPLIT_NAME = re.compile(r"^[a-z0-9_]+$")


class SplitSpec(NamedTuple):
    """Split names with the upper end of each one's slice of [0, 1)."""

    names: tuple[str, ...]
    bounds: tuple[float, ...]


def parse_split_spec(text: str) -> SplitSpec:
    """Parse `train=0.9,validation=0.1`; fractions must be positive and sum to 1."""
    names, bounds, total = [], [], 0.0
    for part in text.split(","):
        name, sep, fraction = part.strip().partition("=")
        if not sep or not _SPLIT_NAME.match(name):
            raise UserError(f"--split: expected name=fraction pairs like train=0.9, got {part!r}")
        try:
            value = float(fraction)
        except ValueError:
            raise UserError(f"--split: {fraction!r} is not a number") from None
        if not 0 < value <= 1 or name in names:
            raise UserError(f"--split: bad or repeated entry {part!r}")
        total += value
        names.append(name)
        bounds.append(total)
    if abs(total - 1.0) > 1e-6:
        raise UserError(f"--split: fractions sum to {total:g}, not 1")
    bounds[-1] = 1.0
    return SplitSpec(tuple(names), tuple(bounds))


def check_split_name(name: str) -> str:
    """A split from a manifest must be usable in a file name."""
    if not _SPLIT_NAME.match(name):
        raise RowError(Reason.BAD_SPLIT, f"split {name!r} must match [a-z0-9_]+")
    return name


def assign_split(key: str, given: str, spec: SplitSpec | None) -> str:
    """The row's own split if it has one, else its hash slice of `spec`, else `train`."""
    if given:
        return check_split_name(given.strip().lower())
    if spec is None:
        return DEFAULT_SPLIT
    point = unit_interval(key, SPLIT_SALT)
    for name, bound in zip(spec.names, spec.bounds, strict=True):
        if point < bound:
            return name
    return spec.names[-1]
