"""preview and stats: what a person looks at before spending TPU hours."""

import base64
import io
import re
from pathlib import Path

import pytest
from conftest import make_images, write_manifest
from PIL import Image

from pipeline.cli import main
from pipeline.convert import run
from pipeline.preview import LABEL_HEIGHT, THUMB

pytestmark = pytest.mark.slow
SAMPLE = Path(__file__).resolve().parents[1] / "sample" / "manifest.csv"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    output = tmp_path_factory.mktemp("read-side") / "out"
    run(["--manifest", str(SAMPLE), "--output", str(output), "--num_shards", "2", "--no_progress"])
    return output


def test_preview_per_class_is_one_row_per_class(sample, tmp_path, capsys):
    target = tmp_path / "grid.png"
    assert main(["preview", str(sample), "-o", str(target), "--per_class", "3"]) == 0
    grid = Image.open(target)
    assert grid.size == (4 + 3 * (THUMB + 4), 4 + 5 * (THUMB + LABEL_HEIGHT + 6))
    assert "15 images" in capsys.readouterr().out


def test_preview_random_is_seeded_and_reads_raw_records(tmp_path):
    output = tmp_path / "raw"
    run(["--manifest", str(SAMPLE), "--output", str(output), "--image_encoding", "raw",
         "--no_progress"])  # fmt: skip
    sheets = []
    for name in ("a.png", "b.png"):
        assert main(["preview", str(output), "-o", str(tmp_path / name), "--random", "7",
                     "--seed", "3"]) == 0  # fmt: skip
        sheets.append((tmp_path / name).read_bytes())
    assert sheets[0] == sheets[1]
    assert main(["preview", str(output), "-o", str(tmp_path / "x.png"), "--split", "test"]) == 2


def test_stats_report_is_one_offline_page(tmp_path):
    rows = make_images(tmp_path, per_class=2) + [{"image_uri": "gone.jpg", "label": "coffee"}]
    output = tmp_path / "out"
    run(["--manifest", str(write_manifest(tmp_path / "m.csv", rows)), "--output", str(output),
         "--max_error_rate", "1", "--no_progress"])  # fmt: skip
    target = tmp_path / "report.html"
    assert main(["stats", str(output), "-o", str(target)]) == 0
    page = target.read_text()
    charts = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(charts) == 3
    for chart in charts:
        Image.open(io.BytesIO(base64.b64decode(chart))).verify()
    assert "http" not in re.sub(r'src="data:[^"]+"', "", page)  # nothing to fetch
    assert "missing_file" in page and "8 records from 9 rows" in page
