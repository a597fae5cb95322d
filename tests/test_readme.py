"""The README as a user follows it: its option table is the one --help is made from, and every
shell and Python example runs as written on the sample dataset and prints what it says."""

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import python_path
from tfrecord_pipeline.config.flags import FLAGS, markdown_table
from tfrecord_pipeline.config.options import ConvertOptions, option_defaults

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CLOUD = "# needs a Google Cloud project"  # an example's first line, where it cannot run here


class Example(NamedTuple):
    language: str
    code: str
    line: int  # where its fence opens in README.md

    @property
    def needs_cloud(self) -> bool:
        return self.code.startswith(CLOUD)

    @property
    def is_make(self) -> bool:
        """The README's `make` commands (demo, test, bench): what they run is tested itself."""
        lines = [line.strip() for line in self.code.splitlines()]
        commands = [line for line in lines if line and not line.startswith("#")]
        return self.language == "sh" and all(line.startswith("make ") for line in commands)


def examples() -> list[Example]:
    """Every ```sh and ```python block, indented ones (in a list) included."""
    fence = re.compile(r"^( *)```(sh|python)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)
    return [
        Example(
            match[2],
            re.sub(f"^{match[1]}", "", match[3], flags=re.MULTILINE),
            README.count("\n", 0, match.start()) + 1,
        )
        for match in fence.finditer(README)
    ]


def _rows(table: str) -> list[list[str]]:
    """A Markdown table's cells, row by row (`\\|` is a `|` inside a cell)."""
    return [
        [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        for line in table.strip().splitlines()
    ]


def test_option_table_is_the_one_help_is_made_from():
    written = re.search(r"### Options\n\n(\|.*?)\n\n", README, re.DOTALL)[1]
    expected = markdown_table(option_defaults())
    assert _rows(written) == _rows(expected), f"README.md's option table should be:\n{expected}"
    dests = [flag.dest for flag in FLAGS]
    assert sorted(dests) == sorted(field.name for field in dataclasses.fields(ConvertOptions))


def test_only_cloud_examples_are_left_unrun():
    found = examples()
    assert len(found) >= 8
    for example in found:
        if example.needs_cloud:
            assert "gs://" in example.code and "--project" in example.code, example.line
        elif example.is_make:
            targets = re.findall(r"^make (\w+)", example.code, re.MULTILINE)
            assert set(targets) <= {"demo", "test", "bench"}, example.line
        else:
            assert "gs://" not in example.code, f"README line {example.line}: mark it {CLOUD!r}"


def _expected_output(code: str) -> list[str]:
    """What a Python example says it prints: the comment after each `print(...)`."""
    return re.findall(r"^\s*print\(.*\)  # (.*)$", code, re.MULTILINE)


def test_every_example_runs_as_written_on_the_sample(tmp_path):
    """In README order, in a folder holding the sample as the repository does: later examples
    read what earlier ones wrote (out/flowers)."""
    shutil.copytree(ROOT / "sample", tmp_path / "sample")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PATH": path, "PYTHONPATH": python_path()}
    ran = 0
    for example in examples():
        if example.needs_cloud or example.is_make:
            continue
        if example.language == "sh":
            command = ["bash", "-e", "-c", example.code]
        else:
            command = [sys.executable, "-c", example.code]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
        where = f"README.md line {example.line}"
        assert done.returncode == 0, f"{where}:\n{done.stderr[-3000:]}"
        if example.language == "python":
            expected = _expected_output(example.code)
            assert expected, f"{where}: say what the example prints in a comment after print()"
            assert done.stdout.splitlines() == expected, where
        ran += 1
    assert ran >= 6
