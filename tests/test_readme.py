"""The README and the docs pages as a user follows them: every shell and Python example runs as
written on the sample dataset and prints what it says, the options page's flag table is the one
--help is made from, and the README fits on a page."""

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

from tfrecord_pipeline.cli.help import markdown_table
from tfrecord_pipeline.config.flags import FLAGS
from tfrecord_pipeline.config.options import ConvertOptions

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
README_LINES = 250  # a front page, read top to bottom once; the rest is in docs/
CLOUD = "# needs a Google Cloud project"  # an example's first line, where it cannot run here
AIRFLOW = "# in Airflow's environment"  # run with Airflow on the PATH by tests/test_airflow.py
# The options page's table, between these two lines, is generated: the test prints it.
TABLE = re.compile(r"^<!-- flags: generated .*? -->\n(.*?)\n<!-- flags: end -->$", re.M | re.S)
INSTALL = re.compile(r'^pip install "?\./tfrecord-pipeline(\[(tf|tfds|dataflow)\])?"?(  +#.*)?$')


class Example(NamedTuple):
    page: str  # the page's path in the repository
    language: str
    code: str
    line: int  # where its fence opens in the page

    @property
    def where(self) -> str:
        return f"{self.page} line {self.line}"

    @property
    def commands(self) -> list[str]:
        lines = [line.strip() for line in self.code.splitlines()]
        return [line for line in lines if line and not line.startswith("#")]

    @property
    def needs_cloud(self) -> bool:
        return self.code.startswith(CLOUD)

    @property
    def needs_airflow(self) -> bool:
        return self.code.startswith(AIRFLOW)

    @property
    def is_make(self) -> bool:
        """The README's `make` commands (demo, test): what they run is tested itself."""
        return self.language == "sh" and all(line.startswith("make ") for line in self.commands)

    @property
    def is_install(self) -> bool:
        """`pip install` of a clone: the wheel's own test installs it into an empty venv."""
        return self.language == "sh" and all(line.startswith("pip ") for line in self.commands)


def examples(page: Path) -> list[Example]:
    """Every ```sh and ```python block of `page`, indented ones (in a list) included."""
    text = page.read_text()
    fence = re.compile(r"^( *)```(sh|python)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)
    return [
        Example(
            str(page.relative_to(ROOT)),
            match[2],
            re.sub(f"^{match[1]}", "", match[3], flags=re.MULTILINE),
            text.count("\n", 0, match.start()) + 1,
        )
        for match in fence.finditer(text)
    ]


def _rows(table: str) -> list[list[str]]:
    """A Markdown table's cells, row by row (`\\|` is a `|` inside a cell)."""
    return [
        [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        for line in table.strip().splitlines()
    ]


def test_readme_fits_on_a_page():
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_LINES, f"README.md is {lines} lines; move the detail into docs/"


def test_readme_links_lead_to_files_of_the_repository():
    """The README is read on the repository's page, outside the site: its links are paths."""
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    assert links
    for link in links:
        assert link.startswith("https://") or (ROOT / link).is_file(), link


def test_option_table_is_the_one_help_is_made_from():
    written = TABLE.search((ROOT / "docs" / "options.md").read_text())
    expected = markdown_table()
    paste = f"docs/options.md's flag table should be (paste it between the markers):\n{expected}"
    assert written and _rows(written[1]) == _rows(expected), paste
    dests = [flag.dest for flag in FLAGS]
    assert sorted(dests) == sorted(field.name for field in dataclasses.fields(ConvertOptions))


def test_only_cloud_examples_are_left_unrun():
    found = [example for page in PAGES for example in examples(page)]
    assert len(found) >= 30
    for example in found:
        if example.needs_cloud:
            assert "gs://" in example.code or "gcloud" in example.code, example.where
        elif example.needs_airflow:
            assert "airflow dags test" in example.code, example.where
        elif example.is_make:
            targets = re.findall(r"^make (\w+)", example.code, re.MULTILINE)
            assert example.page == "README.md" and set(targets) <= {"demo", "test"}, example.where
        elif example.is_install:
            assert all(INSTALL.match(line) for line in example.commands), example.where
        else:
            assert "gs://" not in example.code, f"{example.where}: mark it {CLOUD!r}"


def test_a_page_that_installs_torch_names_its_cpu_build():
    """`pip install torch` on Linux resolves the CUDA build and its nvidia-* packages (several
    GB): a page that says to install torch gives PyTorch's CPU index too."""
    for page in PAGES:
        text = page.read_text()
        if re.search(r"pip install [^`\n]*\btorch\b", text):
            assert "--index-url https://download.pytorch.org/whl/cpu" in text, page


def _expected_output(code: str) -> list[str]:
    """What a Python example says it prints: the comment after each `print(...)`."""
    return re.findall(r"^\s*print\(.*\)  # (.*)$", code, re.MULTILINE)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_example_runs_as_written_on_the_sample(page, tmp_path):
    """A page's examples in order, in a folder holding the sample as the repository does: later
    examples read what earlier ones wrote (out/flowers); each page converts what it reads."""
    shutil.copytree(ROOT / "sample", tmp_path / "sample")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PATH": path, "PYTHONPATH": python_path()}
    for example in examples(page):
        if example.needs_cloud or example.needs_airflow or example.is_make or example.is_install:
            continue
        if example.language == "sh":
            command = ["bash", "-e", "-c", example.code]
        else:
            command = [sys.executable, "-c", example.code]
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{example.where}:\n{done.stderr[-3000:]}"
        if example.language == "python":
            expected = _expected_output(example.code)
            assert expected, f"{example.where}: say what the example prints in a comment"
            assert done.stdout.splitlines() == expected, example.where
