"""Image normalisation and manifest parsing, without Beam."""

import io
import json
import tracemalloc

import pytest
from conftest import encode, photo, read_manifest, write_manifest
from PIL import Image

from transforms.errors import ErrorRow, Reason, RowError, UserError
from transforms.image.images import ImageConfig, normalise, sniff
from transforms.image.jpeg import parse_jpeg
from transforms.image.pixels import check_jpeg_decodes
from transforms.manifest.rows import (
    ManifestRow,
    ReadConfig,
    SkippedFile,
    row_position,
)
from transforms.manifest.sources import describe
from transforms.manifest.splits import parse_split_spec
from transforms.manifest.trees import read_tree

SMALL = photo().resize((64, 48))


def test_valid_rgb_jpeg_is_stored_byte_identical():
    for progressive in (False, True):
        data = encode(SMALL, quality=80, progressive=progressive)
        stored = normalise(data, ImageConfig())
        assert stored.data is data or stored.data == data
        assert (stored.height, stored.width, stored.channels, stored.format) == (48, 64, 3, "JPEG")


@pytest.mark.parametrize("cut", [0.3, 0.9, -2])
def test_truncated_jpeg_is_rejected_by_the_structural_check(cut):
    data = encode(SMALL, quality=80)
    cut_at = int(len(data) * cut) if cut > 0 else len(data) + cut
    with pytest.raises(RowError) as error:
        normalise(data[:cut_at], ImageConfig())
    assert error.value.reason is Reason.CORRUPT_IMAGE


def test_full_validation_decodes_and_catches_garbage_inside_the_scan():
    data = bytearray(encode(SMALL, quality=80))
    normalise(bytes(data), ImageConfig(validate="full"))
    scan = parse_jpeg(bytes(data)) and data.index(b"\xff\xda")
    data[scan + 20 : scan + 24] = b"\xff\xc4\x00\x02"  # a bogus marker inside entropy data
    with pytest.raises(RowError):
        normalise(bytes(data), ImageConfig(validate="full"))


def _without_segments(data: bytes, marker: bytes) -> bytes:
    """The JPEG with every segment of one marker type before the first scan cut out."""
    while (at := data.find(marker, 0, data.index(b"\xff\xda"))) != -1:
        data = data[:at] + data[at + 2 + int.from_bytes(data[at + 2 : at + 4], "big") :]
    return data


def test_full_validation_rejects_what_only_a_decoder_sees():
    no_tables = _without_segments(encode(SMALL, quality=80), b"\xff\xdb")  # no DQT segment
    assert normalise(no_tables, ImageConfig()).data == no_tables  # structurally sound
    with pytest.raises(RowError) as error:
        normalise(no_tables, ImageConfig(validate="full"))
    assert error.value.reason is Reason.CORRUPT_IMAGE and "does not decode" in str(error.value)


@pytest.mark.parametrize("progressive", [False, True])
@pytest.mark.parametrize("cut", [0.3, 0.9, -2])
def test_the_decode_itself_rejects_truncated_scans(progressive, cut):
    data = encode(SMALL, quality=80, progressive=progressive)
    info = parse_jpeg(data)
    check_jpeg_decodes(data, info)
    with pytest.raises(RowError, match="not enough image data"):
        check_jpeg_decodes(data[: int(len(data) * cut) if cut > 0 else len(data) + cut], info)


@pytest.mark.parametrize("size", [(1, 1), (5, 3), (9, 17), (640, 1)])
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_full_validation_keeps_odd_sized_jpegs(size, mode):
    for progressive in (False, True):
        data = encode(SMALL.resize(size).convert(mode), quality=90, progressive=progressive)
        assert normalise(data, ImageConfig(validate="full", channels=len(mode))).data == data


@pytest.mark.parametrize(
    "mode, fmt, params",
    [
        ("RGBA", "PNG", {}),
        ("L", "PNG", {}),
        ("P", "PNG", {}),
        ("L", "JPEG", {}),
        ("CMYK", "JPEG", {}),
        ("RGB", "GIF", {}),
        ("RGB", "BMP", {}),
        ("RGB", "WEBP", {}),
        ("RGB", "TIFF", {}),
        ("I;16", "PNG", {}),
    ],
)
def test_other_formats_become_rgb_jpeg(mode, fmt, params):
    source = SMALL.convert("L").convert(mode) if mode.startswith("I") else SMALL.convert(mode)
    stored = normalise(encode(source, fmt, **params), ImageConfig())
    decoded = Image.open(io.BytesIO(stored.data))
    assert decoded.format == "JPEG" and decoded.mode == "RGB"
    assert (stored.width, stored.height, stored.channels) == (64, 48, 3)


def test_alpha_is_flattened_on_white():
    clear = Image.new("RGBA", (16, 16), (0, 0, 0, 0))
    stored = normalise(encode(clear, "PNG"), ImageConfig())
    assert min(Image.open(io.BytesIO(stored.data)).getdata()) >= (250, 250, 250)


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", Reason.EMPTY_FILE),
        (b"name,label\n", Reason.NOT_AN_IMAGE),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, Reason.CORRUPT_IMAGE),
        (b"\xff\xd8\xff\xe0\x00", Reason.CORRUPT_IMAGE),
    ],
)
def test_bad_bytes_have_reasons(data, reason):
    with pytest.raises(RowError) as error:
        normalise(data, ImageConfig())
    assert error.value.reason is reason


def test_pixel_limit():
    with pytest.raises(RowError) as error:
        normalise(encode(SMALL), ImageConfig(max_pixels=1000))
    assert error.value.reason is Reason.IMAGE_TOO_LARGE


def test_sniff_ignores_names():
    assert sniff(encode(SMALL, "PNG")) == "png" and sniff(encode(SMALL)) == "jpeg"


def test_csv_rows_resolve_relative_paths_and_keep_keys(tmp_path):
    manifest = write_manifest(
        tmp_path / "m.csv",
        [
            {"image_uri": "a/1.jpg", "label": "cat", "split": "", "key": "", "w": "3"},
            {"image_uri": "/abs/2.jpg", "label": "dog", "split": "test", "key": "k2", "w": "x"},
            {"image_uri": "a/3.jpg", "label": " ", "split": "", "key": "", "w": "1"},
        ],
    )
    config = ReadConfig(parse_split_spec("train=1"), (("w", "int64"),))
    rows = read_manifest(str(manifest), 0, config)
    first = len("image_uri,label,split,key,w\r\n")  # records are known by their byte offsets
    assert rows[0] == ManifestRow(
        "a/1.jpg",
        "a/1.jpg",
        "cat",
        "train",
        (("w", 3),),
        str(manifest),
        row_position(0, first),
        f"{tmp_path}/",
    )
    assert rows[0].image_uri == str(tmp_path / "a/1.jpg")
    assert rows[0].key is rows[0].image  # one string for both
    assert rows[0].source == f"{manifest}@{first}"
    assert isinstance(rows[1], ErrorRow) and rows[1].reason is Reason.BAD_FEATURE
    second = first + len("a/1.jpg,cat,,,3\r\n")
    assert rows[1].source == f"{manifest}@{second}"
    assert isinstance(rows[2], ErrorRow) and rows[2].reason is Reason.BAD_LABEL


@pytest.mark.parametrize("value", [str(1 << 63), str(-(1 << 63) - 1), "1e30"])
def test_int64_features_outside_int64_are_bad_features(tmp_path, value):
    manifest = write_manifest(
        tmp_path / "m.csv",
        [{"image_uri": "a.jpg", "label": "cat", "split": "", "key": "", "w": value}],
    )
    config = ReadConfig(parse_split_spec("train=1"), (("w", "int64"),))
    (row,) = read_manifest(str(manifest), 0, config)
    assert isinstance(row, ErrorRow) and row.reason is Reason.BAD_FEATURE


def test_jsonl_rows_and_bad_lines(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(
        json.dumps({"image_uri": "x.jpg", "label": 3})
        + "\n\n{not json\n[1]\n"
        + json.dumps({"label": "a"})
        + "\n"
        + json.dumps({"image_uri": "y.jpg", "label": ["a"]})
        + "\n"
        + json.dumps({"image_uri": "y.jpg", "label": True})
        + "\n"
        + json.dumps({"image_uri": "y.jpg", "label": "a", "split": 1})
        + "\n"
    )
    rows = read_manifest(str(path), 1, ReadConfig())
    assert rows[0].label == "3" and rows[0].position == row_position(1, 0)
    assert [r.reason for r in rows[1:]] == [Reason.BAD_ROW] * 3 + [Reason.BAD_LABEL] * 2 + [
        Reason.BAD_SPLIT
    ]


def test_tree_reads_labels_splits_and_skips_other_files(tmp_path):
    for rel in ("train/cat/1.jpg", "train/dog/2.PNG", "validation/cat/3.jpeg", "cat/4.jpg"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    (tmp_path / "train/cat/notes.txt").write_text("hi")
    (tmp_path / "README.md").write_text("hi")
    items = list(read_tree(str(tmp_path), 0, ReadConfig()))
    rows = [(r.key, r.label, r.split) for r in items if isinstance(r, ManifestRow)]
    assert sorted(rows) == [
        ("cat/4.jpg", "cat", "train"),
        ("train/cat/1.jpg", "cat", "train"),
        ("train/dog/2.PNG", "dog", "train"),
        ("validation/cat/3.jpeg", "cat", "validation"),
    ]
    assert sum(isinstance(item, SkippedFile) for item in items) == 2


def test_a_tree_given_as_a_relative_path_has_absolute_image_paths(tmp_path, monkeypatch):
    (tmp_path / "t/cat").mkdir(parents=True)
    (tmp_path / "t/cat/1.jpg").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    (row,) = read_tree("t", 0, ReadConfig())
    assert (row.key, row.image_uri) == ("cat/1.jpg", str(tmp_path / "t/cat/1.jpg"))


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


@pytest.mark.parametrize("data", [b"GIF89a" + bytes(3), b"BM" + b"\x01" * 10])
def test_data_no_decoder_accepts_is_described_the_same_every_time(data):
    """Errors files are part of the output: Pillow's own text names the buffer's memory address."""
    messages = set()
    for _ in range(2):
        with pytest.raises(RowError) as raised:
            normalise(bytes(data), ImageConfig())
        assert raised.value.reason == Reason.CORRUPT_IMAGE
        messages.add(raised.value.message)
    assert messages == {"no image decoder accepts the data"}
