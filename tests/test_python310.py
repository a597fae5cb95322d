"""What the minimum-version check in `make lint` (vermin) cannot see: a regular expression whose
syntax Python 3.11 added (possessive quantifiers, atomic groups) compiles on this machine's
Python and raises `re.error` on 3.10, which setup.py declares and TPU VM images ship."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
# re's parser names the 3.11 constructs by these opcodes.
NEWER = {"POSSESSIVE_REPEAT", "ATOMIC_GROUP"}
RE_CALLS = {"compile", "match", "fullmatch", "search", "sub", "subn", "split", "findall"}


def _opcodes(parsed) -> set[str]:
    """Every opcode in a parsed pattern, nested ones too."""
    found = set()
    for opcode, argument in parsed:
        found.add(str(opcode))
        items = argument if isinstance(argument, (list, tuple)) else [argument]
        for item in items:
            if isinstance(item, re._parser.SubPattern):
                found |= _opcodes(item)
            elif isinstance(item, (list, tuple)):
                for inner in item:
                    if isinstance(inner, re._parser.SubPattern):
                        found |= _opcodes(inner)
    return found


def _patterns(path: Path):
    """(line, pattern) of each literal pattern given to a function of `re` in a module."""
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in RE_CALLS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            yield node.lineno, node.args[0].value


def newer_syntax(path: Path) -> list[tuple[int, str]]:
    return [
        (line, pattern)
        for line, pattern in _patterns(path)
        if _opcodes(re._parser.parse(pattern)) & NEWER
    ]


def test_the_check_finds_a_possessive_quantifier_and_an_atomic_group(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("import re\nA = re.compile(r'a++')\nB = re.compile(r'(?>b)c')\n")
    assert [line for line, _ in newer_syntax(module)] == [2, 3]


@pytest.mark.parametrize("folder", ["pipeline", "transforms"])
def test_no_pattern_needs_python_3_11(folder):
    found = {
        f"{path.relative_to(ROOT)}:{line}": pattern
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, pattern in newer_syntax(path)
    }
    assert found == {}
