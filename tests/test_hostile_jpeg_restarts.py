"""Restart markers as a hostile user stacks them: a JPEG's marker limit must count every
empty marker that stands in the file, including the restart markers (RST0-RST7) the walk
passes over inside and after a scan's data. libjpeg skips a stray restart marker silently,
so neither the walk nor the strict decode notices them (issue 29, must-hold 8)."""

import subprocess
import sys
from pathlib import Path

from conftest import PHOTOS, REPOSITORY, error_rows, traced_peak, write_manifest

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


def _flooded(data: bytes, size: int) -> bytes:
    """`data` with `size` bytes of restart markers inside its first scan's data, 64 bytes
    after the scan header (a cut after a 0xFF would split a stuffed zero from it)."""
    header = data.index(b"\xff\xda")
    cut = header + 2 + int.from_bytes(data[header + 2 : header + 4]) + 64
    while data[cut - 1] == 0xFF:
        cut += 1
    return data[:cut] + RESTARTS * (size // len(RESTARTS)) + data[cut:]


_PARSE_SETUP = """
from tfrecord_pipeline.transforms.errors import RowError
from tfrecord_pipeline.transforms.image.jpeg import parse_jpeg
data = open(sys.argv[1], "rb").read()
"""
_PARSE = """
try:
    parse_jpeg(data)
except RowError as error:
    print(error.reason)
"""


def test_a_scan_flooded_with_restart_markers_is_refused_in_bounded_memory(tmp_path):
    """Issue 41: 250 MB of restart markers inside a scan peaked at 7.4 GB: the walk listed
    every one of them to count them (about 40 bytes a marker). Listed a window at a time and
    counted no further than the limit, 8 MB of them (4 million markers) hold a few MB."""
    path = tmp_path / "flood.jpg"
    path.write_bytes(_flooded(ROCKET, 8 * 2**20))
    printed, peak = traced_peak(_PARSE_SETUP, _PARSE, str(path))
    assert printed == ["too_many_markers"]
    assert peak < 4 * 2**20
