"""How argparse reads a flag's value (pipeline/config/flags.py): a switch as a scheduler's
launcher passes one, and numbers, a float only when finite."""

import argparse
import math


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
SWITCH = {"nargs": "?", "const": True, "type": _switch, "metavar": "true|false"}
INT, FLOAT = {"type": int}, {"type": _finite}
