"""preview and stats: what a person looks at before spending TPU hours."""

import html
import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import arguments, chromium, command, make_images, published, write_manifest
from PIL import Image

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.metadata import INFO_FILE
from tfrecord_pipeline.read.preview import BOX_COLOURS, LABEL_HEIGHT, THUMB
from tfrecord_pipeline.runners.convert import run

pytestmark = pytest.mark.slow
SAMPLE = Path(__file__).resolve().parents[1] / "sample" / "manifest.csv"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    output = tmp_path_factory.mktemp("read-side") / "out"
    argv = arguments(
        "--manifest {m} --output {out} --num_shards 3 --split train=0.8,validation=0.2"
        " --no_progress",
        m=SAMPLE,
        out=output,
    )
    run(argv)
    return output


def test_preview_per_class_is_one_row_per_class(sample, tmp_path, capsys):
    target = tmp_path / "grid.png"
    assert main(["preview", str(sample), "-o", str(target), "--per_class", "3"]) == 0
    grid = Image.open(target)
    assert grid.size == (4 + 3 * (THUMB + 4), 4 + 5 * (THUMB + LABEL_HEIGHT + 6))
    assert "15 images" in capsys.readouterr().out


def test_preview_random_is_seeded_and_reads_raw_records(tmp_path):
    output = tmp_path / "raw"
    argv = arguments(
        "--manifest {m} --output {out} --image_encoding raw --no_progress", m=SAMPLE, out=output
    )
    run(argv)
    sheets = []
    for name in ("a.png", "b.png"):
        sheet = tmp_path / name
        argv = arguments("preview {out} -o {sheet} --random 7 --seed 3", out=output, sheet=sheet)
        assert main(argv) == 0
        sheets.append((tmp_path / name).read_bytes())
    assert sheets[0] == sheets[1]
    assert main(["preview", str(output), "-o", str(tmp_path / "x.png"), "--split", "test"]) == 2


# The first bytes of each format `preview -o` writes (WebP: a RIFF container, then its name).
MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".jpg": b"\xff\xd8\xff", ".jpeg": b"\xff\xd8\xff"}


@pytest.mark.parametrize("extension", [".png", ".jpg", ".JPEG", ".webp"])
def test_preview_writes_the_format_its_extension_names(sample, tmp_path, extension):
    target = tmp_path / f"grid{extension}"
    assert main(["preview", str(sample), "-o", str(target), "--random", "4"]) == 0
    data = target.read_bytes()
    if extension.lower() == ".webp":
        assert data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    else:
        assert data.startswith(MAGIC[extension.lower()])
    assert Image.open(target).size[0] > 0


@pytest.mark.parametrize("name", ["grid.gif", "grid", "grid.png.txt"])
def test_preview_refuses_an_extension_it_does_not_write_in_one_line(sample, tmp_path, name):
    done = command("preview", sample, "-o", tmp_path / name)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == (
        f"tfrecord-pipeline: error: {tmp_path / name}: preview writes .png, .jpg, .jpeg, .webp "
        "files; name -o with one of them\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["r.png", "report", "report.html.txt"])
def test_stats_refuses_an_out_file_not_named_html_before_reading(tmp_path, name):
    """`stats -o r.png` wrote HTML into a file its name said was a PNG. The root given does
    not exist: the name is refused before the dataset is read."""
    done = command("stats", tmp_path, "-o", tmp_path / name)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == (
        f"tfrecord-pipeline: error: {tmp_path / name}: stats writes .html, .htm files; name -o "
        "with one of them\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["report.html", "REPORT.HTM"])
def test_stats_writes_an_out_file_named_html_in_any_case(sample, tmp_path, name):
    assert main(["stats", str(sample), "-o", str(tmp_path / name)]) == 0
    assert (tmp_path / name).read_text().startswith("<!doctype html>")


@pytest.mark.parametrize("flag", ["--per_class", "--random"])
@pytest.mark.parametrize("count", ["0", "-3"])
def test_preview_refuses_a_count_of_no_images(sample, tmp_path, flag, count):
    """0 showed the default 4 a class and -3 wrote an empty sheet, both with exit status 0."""
    done = command("preview", sample, "-o", tmp_path / "sheet.png", flag, count)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == (
        f"tfrecord-pipeline: error: argument {flag}: expected a whole number of 1 or more, "
        f"got '{count}'\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv, target, cause",
    [
        ("preview -o {tmp}/sheet.png", "sheet.png", "Is a directory"),  # a folder of that name
        ("stats -o {tmp}/report.html", "report.html", "Is a directory"),
        ("stats -o {tmp}/file/report.html", "file/report.html", "File exists"),
    ],
)
def test_an_out_file_that_cannot_be_written_is_one_line(sample, tmp_path, argv, target, cause):
    (tmp_path / "sheet.png").mkdir()
    (tmp_path / "report.html").mkdir()
    (tmp_path / "file").write_text("in the way")
    command_name, *flags = arguments(argv, tmp=tmp_path)
    done = command(command_name, sample, *flags)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    said = f"-o {tmp_path / target}: cannot write there ({cause})"
    assert done.stderr == f"tfrecord-pipeline: error: {said}\n"


def test_stats_report_is_one_offline_page(tmp_path):
    rows = make_images(tmp_path, per_class=2) + [{"image_uri": "gone.jpg", "label": "coffee"}]
    output = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.csv", rows)
    argv = arguments(
        "--manifest {m} --output {out} --max_error_rate 1 --no_progress", m=manifest, out=output
    )
    run(argv)
    target = tmp_path / "report.html"
    assert main(["stats", str(output), "-o", str(target)]) == 0
    page = target.read_text()
    assert page.count("<table class='bars'>") == 3  # labels, image sizes, shard sizes
    assert "http" not in page and "<script" not in page and "<img" not in page  # nothing to fetch
    assert "missing_file" in page and "8 records from 9 rows" in page


# Run in the page once it is laid out; what it finds is written into the page for --dump-dom.
MEASURE = """<script>
const bars = [...document.querySelectorAll("table.bars")];
const names = bars.flatMap(table => [...table.querySelectorAll("th")]);
const text = [...document.body.querySelectorAll("*")].filter(e => e.childNodes.length &&
  [...e.childNodes].some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim()));
const out = document.createElement("pre");
out.id = "measured";
out.textContent = JSON.stringify({
  page: document.documentElement.clientWidth,
  scrolls_sideways: document.documentElement.scrollWidth > document.documentElement.clientWidth,
  names: names.map(th => th.innerText),
  clipped: names.filter(th => th.scrollWidth > th.clientWidth).map(th => th.innerText),
  chart_widths: bars.map(table => table.getBoundingClientRect().width),
  longest_bars: bars.map(table => Math.max(...[...table.querySelectorAll("td.bar div")]
    .map(bar => bar.getBoundingClientRect().width))),
  smallest_font: Math.min(...text.map(e => parseFloat(getComputedStyle(e).fontSize))),
});
document.body.append(out);
</script>"""


@pytest.mark.parametrize("width", [1400, 700])
def test_stats_report_as_a_browser_shows_it(sample, tmp_path, width):
    """The report in headless Chromium: every shard's full name, chart text at a readable size,
    charts as wide as the page, nothing to scroll sideways."""
    browser = chromium()
    report = tmp_path / "report.html"
    assert main(["stats", str(sample), "-o", str(report)]) == 0
    report.write_text(report.read_text().replace("</body>", MEASURE + "</body>"))
    shown = subprocess.run(
        arguments(
            "{browser} --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
            " --disable-background-networking --disable-component-update --disable-sync"
            " --user-data-dir={profile} --window-size={width},1000 --dump-dom {page}",
            browser=browser,
            profile=tmp_path / "profile",
            width=width,
            page=report.as_uri(),
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    measured = re.search(r'<pre id="measured">(.*?)</pre>', shown.stdout, re.DOTALL)
    assert measured, shown.stderr[-2000:]
    page = json.loads(html.unescape(measured[1]))
    info = json.loads((published(sample) / INFO_FILE).read_text())
    shards = [shard["file"] for split in info["splits"].values() for shard in split["shards"]]
    assert set(shards) <= set(page["names"]) and len(shards) == 6
    assert page["clipped"] == []
    assert page["smallest_font"] >= 14
    assert not page["scrolls_sideways"]
    for chart, longest in zip(page["chart_widths"], page["longest_bars"], strict=True):
        assert chart >= 0.9 * page["page"] and longest >= 0.4 * page["page"]


def test_preview_draws_a_detection_records_boxes_and_files_it_under_each_label(tmp_path, capsys):
    Image.new("RGB", (100, 80), (128, 128, 128)).save(tmp_path / "grey.jpg", quality=95)
    objects = [
        {"bbox": [0.25, 0.5, 0.75, 1.0], "label": "cat"},
        {"bbox": [0, 0, 1, 1], "label": "mat"},
    ]
    row = {"image_uri": "grey.jpg", "box_format": "xyxy_normalized", "objects": objects}
    output = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", [row])
    run(arguments("--manifest {m} --output {out} --no_progress", m=manifest, out=output))
    target = tmp_path / "boxes.png"
    assert main(["preview", str(output), "-o", str(target), "--per_class", "1"]) == 0
    assert "2 images" in capsys.readouterr().out  # one row per label: cat, mat
    sheet = Image.open(target).convert("RGB")
    cat = Image.new("RGB", (1, 1), BOX_COLOURS[0]).getpixel((0, 0))
    assert sheet.getpixel((4 + 25, 4 + 60)) == cat  # the cat box's left edge, half way down
    inside = sheet.getpixel((4 + 50, 4 + 20))  # the image itself: flat grey, as JPEG keeps it
    assert all(abs(channel - 128) <= 3 for channel in inside)
