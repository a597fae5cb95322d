"""transforms/manifest/sources.py: a manifest described by the launcher (its kind, its start) and
read whole; the ones no reader can use are one UserError."""

import tracemalloc

import pytest
from conftest import read_manifest, write_manifest

from tfrecord_pipeline.transforms.errors import Reason, UserError
from tfrecord_pipeline.transforms.manifest.rows import (
    ManifestRow,
    ReadConfig,
)
from tfrecord_pipeline.transforms.manifest.sources import describe


@pytest.mark.parametrize(
    "body, message",
    [
        ("path,label\nx.jpg,a\n", r"missing column\(s\) image_uri"),
        ("image_uri,label\n", "no rows"),
        ("", "missing column"),
    ],
)
def test_unusable_manifests_are_user_errors(tmp_path, body, message):
    path = tmp_path / "m.csv"
    path.write_text(body)
    with pytest.raises(UserError, match=message):
        describe(str(path), 0, ReadConfig())


def test_the_launcher_reads_the_start_and_a_bad_byte_further_on_is_a_bad_row(tmp_path):
    """The launcher's check reads the header and the first lines, however long the file; a
    line that is not UTF-8 further on is found by its reader: one bad_row, the rest read. A
    BOM is dropped; a header that is not UTF-8 is a usage error."""
    rows = "".join(f"images/{i}.jpg,cat\r\n" for i in range(400_000))
    body = f"image_uri,label\r\n{rows}".encode()
    path = tmp_path / "m.csv"
    path.write_bytes(b"\xef\xbb\xbf" + body + b"x.jpg,\xff\xfe\r\nlast.jpg,cat\r\n")
    tracemalloc.start()
    describe(str(path), 0, ReadConfig())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert path.stat().st_size > 8 << 20 and peak < 1 << 20  # a few small reads, not the file
    *_, bad, last = read = read_manifest(str(path), 0, ReadConfig())
    assert len(read) == 400_002 and read[0].key == "images/0.jpg" and last.key == "last.jpg"
    assert (bad.reason, bad.message) == (Reason.BAD_ROW, "not UTF-8 text (bytes ff)")
    assert bad.source == f"{path}@{3 + len(body)}"
    path.write_bytes(b"image_uri,\xfflabel\n" + body)
    with pytest.raises(UserError, match="not UTF-8 text .bytes ff."):
        describe(str(path), 0, ReadConfig())


def test_manifest_of_unknown_type_and_empty_tree(tmp_path):
    with pytest.raises(UserError, match="must be .csv"):
        describe(str(tmp_path / "m.txt"), 0, ReadConfig())
    with pytest.raises(UserError, match="no images"):
        describe(str(tmp_path), 0, ReadConfig())


def test_a_jsonl_manifest_whose_first_row_is_over_64_kb_is_still_detection(tmp_path):
    # A crowded image: its objects make the first line longer than the launcher's first read.
    objects = [{"bbox": [n % 100, n % 90, 3, 3], "label": "person"} for n in range(1500)]
    rows = [
        {"image_uri": "a.jpg", "box_format": "xywh", "objects": objects},
        {"image_uri": "b.jpg", "box_format": "xywh", "objects": []},
    ]
    manifest = write_manifest(tmp_path / "crowd.jsonl", rows)
    assert len(manifest.read_text().split("\n")[0]) > 64 << 10
    assert describe(str(manifest), 0, ReadConfig()).detection
    config = ReadConfig(detection=True)
    read = read_manifest(manifest, config=config)
    assert all(isinstance(item, ManifestRow) for item in read), read
    assert len(read[0].objects) == 1500
