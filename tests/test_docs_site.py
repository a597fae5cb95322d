"""The docs site builds as MkDocs builds it for readers, with --strict: a broken link or anchor,
a nav entry naming no page, or a page left out of the nav fails the build, and so this test."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_site_builds_strict(tmp_path):
    command = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    config = ["--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice of its successor
    done = subprocess.run([*command, *config], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
