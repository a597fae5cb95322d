"""Restart markers as a hostile user stacks them: a JPEG's marker limit must count every
empty marker that stands in the file, including the restart markers (RST0-RST7) the walk
passes over inside and after a scan's data. libjpeg skips a stray restart marker silently,
so neither the walk nor the strict decode notices them (issue 29, must-hold 8)."""

import subprocess
import sys
from pathlib import Path

from conftest import PHOTOS, REPOSITORY, error_rows, write_manifest

ROCKET = (PHOTOS / "rocket.jpg").read_bytes()  # a camera's baseline JPEG without restarts
RESTARTS = bytes(byte for code in range(0xD0, 0xD8) for byte in (0xFF, code))


def test_a_photo_followed_by_millions_of_restart_markers_is_refused(tmp_path):
    """Found by hand: rocket.jpg with 250 MB of RST0-RST7 before its EOI converted with exit
    0 in both modes, taking 2.6 s and 518 MB, and was stored as a 250 MB record. 4 MB of them
    (262,144 markers, 8 times the marker limit, against the photo's 1,080 MCUs) shows it."""
    bomb = ROCKET[:-2] + RESTARTS * (4 * 2**20 // len(RESTARTS)) + b"\xff\xd9"
    (tmp_path / "sound.jpg").write_bytes(ROCKET)
    (tmp_path / "bomb.jpg").write_bytes(bomb)
    rows = [{"image_uri": name, "label": "a"} for name in ("sound.jpg", "bomb.jpg")]
    manifest = write_manifest(tmp_path / "m.csv", rows)
    root = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "tfrecord_pipeline.cli.main", "convert", "--manifest", str(manifest)]
        + ["--output", str(root), "--max_error_rate", "1", "--no_progress"],
        capture_output=True,
        text=True,
        cwd=REPOSITORY,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    (version,) = (root / "versions").iterdir()
    (row,) = error_rows(version)
    assert (Path(row["row"]["image_uri"]).name, row["reason"]) == ("bomb.jpg", "too_many_markers")
