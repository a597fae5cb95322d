"""The kinds of value an option takes (pipeline/config/flags.py): how argparse reads one (a
switch as a scheduler's launcher passes one, numbers, a float only when finite), the Python
type of `ConvertOptions`' field, and the pattern a Flex Template parameter must match."""

import argparse
import math
from collections.abc import Mapping
from typing import Any, NamedTuple


class Kind(NamedTuple):
    """A kind of value: argparse's keywords, the field's type, the template's pattern (None:
    any text), the values it takes (none: any), and older spellings of them (old: new)."""

    parse: Mapping[str, Any]
    type: Any
    pattern: str | None = None
    choices: tuple[str, ...] = ()
    spellings: Mapping[str, str] = {}


def _switch(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _finite(text: str) -> float:
    """A number of MB, a rate or a latency: `nan` and `inf` are none (`int(inf * 2**20)`, say,
    is an OverflowError where the size in bytes is made)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


# `--flag`, or `--flag=true|false` as Flex Template launchers pass every parameter.
SWITCH = Kind(
    {"nargs": "?", "const": True, "type": _switch, "metavar": "true|false"}, bool, "^(true|false)$"
)
OFF_SWITCH = Kind({"action": "store_false"}, bool)  # `--no_x` clears field `x`
INT = Kind({"type": int}, int, "^[0-9]+$")
FLOAT = Kind({"type": _finite}, float, r"^[0-9]*\.?[0-9]+$")
TEXT = Kind({}, str)
# One or more, the flag given once or again for more (`--manifest a.tar --manifest b.tar`).
PATHS = Kind({"nargs": "+", "action": "extend"}, list[str])
REPEATED = Kind({"action": "append"}, list[str])  # the flag given again for each


def choice(names, spellings: Mapping[str, str] | None = None) -> Kind:
    """One of `names`. An older spelling (`spellings`, old: new) is refused, saying what it is
    now, so no two values do the same; a version recorded with one still reads as the name it
    maps to (pipeline/config/options.py `normalised`)."""
    names, spellings = tuple(names), dict(spellings or {})

    def named(text: str) -> str:
        if text in spellings:
            raise argparse.ArgumentTypeError(
                f"{text!r} is no longer a value: it did what {spellings[text]!r} does, so say "
                f"{spellings[text]} (choose from {', '.join(names)})"
            )
        return text

    return Kind({"choices": names, "type": named}, str, f"^({'|'.join(names)})$", names, spellings)


class Check(NamedTuple):
    """What a value must be: `test` says whether it is, `says` what is wrong when not, after
    the flag's name (`{value}` stands for the value given). A cross-option check's test takes
    the options whole, and its `says` is the whole line (`{field}` stands for a field)."""

    test: Any  # Callable[[value], bool]
    says: str


POSITIVE = Check(lambda value: value > 0, "must be positive")


def between(low, high, says: str = "") -> Check:
    """From `low` to `high`, both included."""
    return Check(lambda value: low <= value <= high, says or f"must be between {low} and {high}")
