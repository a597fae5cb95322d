"""Split names and the deterministic `--split train=0.9,validation=0.1` assignment."""

import re
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import Reason, RowError, UserError
from tfrecord_pipeline.transforms.keys import SPLIT_SALT, unit_interval

DEFAULT_SPLIT = "train"
# A split names its shards' files, and a staged file adds ~75 characters to it (shard numbers,
# format suffix, a random suffix, `.rows`): 64 keeps every name far below the 255 bytes a file
# name may have, and is longer than any split name a dataset uses.
MAX_SPLIT_NAME = 64
_SPLIT_NAME = re.compile(rf"[a-z0-9_]{{1,{MAX_SPLIT_NAME}}}")
SPLIT_RULE = f"[a-z0-9_], at most {MAX_SPLIT_NAME} characters"


class SplitSpec(NamedTuple):
    """Split names with the upper end of each one's slice of [0, 1)."""

    names: tuple[str, ...]
    bounds: tuple[float, ...]


def parse_split_spec(text: str) -> SplitSpec:
    """Parse `train=0.9,validation=0.1`; fractions must be positive and sum to 1. A share over 1
    is refused as what it most likely is, a percentage (`train=80`), with the fraction meant."""
    names, bounds, total = [], [], 0.0
    for part in text.split(","):
        name, sep, fraction = part.strip().partition("=")
        if not sep or not is_split_name(name):
            raise UserError(
                f"--split: expected name=fraction pairs like train=0.9, names {SPLIT_RULE};"
                f" got {_shown(part)}"
            )
        try:
            value = float(fraction)
        except ValueError:
            raise UserError(f"--split: {fraction!r} is not a number") from None
        if value > 1:
            raise UserError(
                f"--split: {part.strip()!r}: a share is a fraction of 1, not a percentage "
                f"(shares sum to 1: {name}={value / 100:g}, not {name}={fraction.strip()})"
            )
        if not value > 0 or name in names:
            raise UserError(f"--split: bad or repeated entry {part!r}")
        total += value
        names.append(name)
        bounds.append(total)
    if abs(total - 1.0) > 1e-6:
        raise UserError(f"--split: fractions sum to {total:g}, not 1 (train=0.9,validation=0.1)")
    bounds[-1] = 1.0
    return SplitSpec(tuple(names), tuple(bounds))


def is_split_name(name: str) -> bool:
    """Whether `name` is a split's: the whole of it (a final line break too: `$` would allow it)."""
    return _SPLIT_NAME.fullmatch(name) is not None


def check_split_name(name: str) -> str:
    """A split from a manifest must be usable in a file name."""
    if not is_split_name(name):
        raise RowError(Reason.BAD_SPLIT, f"split {_shown(name)} must be {SPLIT_RULE}")
    return name


def _shown(text: str) -> str:
    """`text` quoted for a message, cut short when long (a split name can be any cell)."""
    return repr(text) if len(text) <= MAX_SPLIT_NAME + 16 else f"{text[:MAX_SPLIT_NAME]!r}..."


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
