"""The README as a user follows it: its option table is the one --help is made from."""

import dataclasses
import re
from pathlib import Path

from pipeline.flags import FLAGS, markdown_table
from pipeline.options import ConvertOptions, option_defaults

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _rows(table: str) -> list[list[str]]:
    """A Markdown table's cells, row by row (`\\|` is a `|` inside a cell)."""
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in
            table.strip().splitlines()]  # fmt: skip


def test_option_table_is_the_one_help_is_made_from():
    written = re.search(r"### Options\n\n(\|.*?)\n\n", README, re.DOTALL)[1]
    expected = markdown_table(option_defaults())
    assert _rows(written) == _rows(expected), f"README.md's option table should be:\n{expected}"
    dests = [flag.dest for flag in FLAGS]
    assert sorted(dests) == sorted(field.name for field in dataclasses.fields(ConvertOptions))
