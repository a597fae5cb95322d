"""JPEGs that break the image check's promises unless it decodes and bounds its walk: a file cut
short whose scan data then ends however it ends (an EOI appended, zeros, garbage), which
`tf.io.decode_jpeg` decodes with a warning into rows of flat grey, a photo behind millions of
empty marker segments or megabytes of metadata, and a few bytes of arithmetic coding claiming a
large frame. Each is built here from the committed photos and must become its error
row through a real conversion; `verify` must find the short one stored by an older converter."""

import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import PHOTOS, command, encode, error_rows, photo, write_manifest

from tfrecord_pipeline.transforms.image import scans

ROCKET = (PHOTOS / "rocket.jpg").read_bytes()  # a camera's baseline JPEG, 640x427
PROGRESSIVE = encode(photo("chelsea.png"), quality=90, progressive=True)
EMPTY_COMMENT = b"\xff\xfe\x00\x02"


def _cut(data: bytes, tail: bytes) -> bytes:
    """The first 70% of the file, then `tail` where the rest was (a 0xFF the cut split from
    its stuffed zero left out, so that the tail does not make a marker of it)."""
    return data[: len(data) * 7 // 10].removesuffix(b"\xff") + tail


SHORT = {
    "cut, EOI appended": _cut(ROCKET, b"\xff\xd9"),
    "cut, zeros to the old length, EOI": _cut(ROCKET, bytes(len(ROCKET) * 3 // 10) + b"\xff\xd9"),
    "cut, garbage, EOI": _cut(ROCKET, b"garbage " * 250 + b"\xff\xd9"),
    "progressive cut, EOI appended": _cut(PROGRESSIVE, b"\xff\xd9"),
}


def test_tensorflow_decodes_a_cut_file_with_an_eoi_into_flat_grey():
    """The reference reader's view of the first file: the full frame, its last rows grey."""
    image = tf.io.decode_jpeg(SHORT["cut, EOI appended"]).numpy()
    assert image.shape == (427, 640, 3)
    assert np.all(image[-8:] == 128)


def _run(*argv: str) -> subprocess.CompletedProcess:
    """The command in a process of its own; a conversion publishes whatever it rejects."""
    if argv[0] == "convert":
        argv = (*argv, "--max_error_rate", "1", "--no_progress")
    return command(*argv, timeout=600)


@pytest.mark.parametrize("validate", ["scans", "pixels"])
def test_a_jpeg_cut_short_is_an_error_row_however_it_ends(tmp_path, validate):
    rows = [{"image_uri": "sound.jpg", "label": "a"}]
    (tmp_path / "sound.jpg").write_bytes(ROCKET)
    for index, data in enumerate(SHORT.values()):
        (tmp_path / f"{index}.jpg").write_bytes(data)
        rows.append({"image_uri": f"{index}.jpg", "label": "a"})
    manifest = write_manifest(tmp_path / "m.csv", rows)
    root = tmp_path / "out"
    done = _run(
        "convert", "--manifest", str(manifest), "--output", str(root), "--validate", validate
    )
    assert done.returncode == 0, done.stderr
    (version,) = (root / "versions").iterdir()
    errors = {Path(row["row"]["image_uri"]).name: row for row in error_rows(version)}
    assert sorted(errors) == [f"{index}.jpg" for index in range(len(SHORT))]
    for row in errors.values():
        assert row["reason"] == "corrupt_image"
        assert "premature end of data segment" in row["message"]


def test_a_photo_behind_millions_of_empty_segments_is_refused_by_its_marker_count(tmp_path):
    """250 MB of empty COM segments before a 40 KB photo's frame: under --max_file_mb (256), it
    took 15-44 s and over 500 MB to walk, and was stored as a 262 MB record."""
    bomb = ROCKET[:2] + EMPTY_COMMENT * (250_000_000 // len(EMPTY_COMMENT)) + ROCKET[2:]
    (tmp_path / "sound.jpg").write_bytes(ROCKET)
    (tmp_path / "bomb.jpg").write_bytes(bomb)
    del bomb
    rows = [{"image_uri": name, "label": "a"} for name in ("sound.jpg", "bomb.jpg")]
    manifest = write_manifest(tmp_path / "m.csv", rows)
    root = tmp_path / "out"
    done = _run("convert", "--manifest", str(manifest), "--output", str(root))
    assert done.returncode == 0, done.stderr
    (version,) = (root / "versions").iterdir()
    (row,) = error_rows(version)
    assert (Path(row["row"]["image_uri"]).name, row["reason"]) == ("bomb.jpg", "too_many_markers")


def _arithmetic(width: int, height: int, coded: bytes) -> bytes:
    """A grayscale arithmetic-coded JPEG (SOF9) of `width` x `height` whose scan data is
    `coded`: libjpeg decodes ten zero bytes into a flat grey frame of any size, no warning."""
    table = b"\xff\xdb" + struct.pack(">HB", 67, 0) + bytes([1] * 64)
    frame = b"\xff\xc9" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    scan = b"\xff\xda" + struct.pack(">HB", 8, 1) + b"\x01\x00\x00\x3f\x00"
    return b"\xff\xd8" + table + frame + scan + coded + b"\xff\xd9"


APP2 = b"\xff\xe2\xff\xff" + bytes(65533)  # a 64 KB APP2 segment, as ICC profiles are chunked
BOMBS = {
    "arithmetic.jpg": (_arithmetic(4000, 3000, bytes(10)), "too_compressed"),
    "app_segments.jpg": (ROCKET[:2] + APP2 * 32 + ROCKET[2:], "too_much_metadata"),
    "after_eoi.jpg": (ROCKET + bytes(2 * 2**20), "too_much_metadata"),
}


def test_few_bytes_claiming_a_large_frame_and_a_photo_padded_with_metadata_are_refused(tmp_path):
    """Issue 41, small: 106 bytes of arithmetic coding claiming 13000x13000 became a record of
    several MB at 850 MB RSS; a photo behind 250 MB of 64 KB APP segments, or followed by as
    much after its EOI, a record of that size. 2 MB of them over a 1 MB limit show the rule;
    1 MB of APP segments passes."""
    rows = [{"image_uri": "sound.jpg", "label": "a"}, {"image_uri": "under.jpg", "label": "a"}]
    (tmp_path / "sound.jpg").write_bytes(ROCKET)
    (tmp_path / "under.jpg").write_bytes(ROCKET[:2] + APP2 * 15 + ROCKET[2:])
    for name, (data, _) in BOMBS.items():
        (tmp_path / name).write_bytes(data)
        rows.append({"image_uri": name, "label": "a"})
    manifest = write_manifest(tmp_path / "m.csv", rows)
    root = tmp_path / "out"
    argv = ("convert", "--manifest", manifest, "--output", root, "--max_metadata_mb", "1")
    done = _run(*argv)
    assert done.returncode == 0, done.stderr
    (version,) = (root / "versions").iterdir()
    errors = {Path(row["row"]["image_uri"]).name: row["reason"] for row in error_rows(version)}
    assert errors == {name: reason for name, (_, reason) in BOMBS.items()}


@pytest.fixture
def old_version(tmp_path, monkeypatch):
    """A dataset root whose published version holds a JPEG cut short with an EOI appended, as
    the converters before the scans check stored it (the check switched off here, in this
    process and the shard writers it forks)."""
    from tfrecord_pipeline.runners.convert import run

    monkeypatch.setattr(scans, "check_scans", lambda data, info, full=False: None)
    (tmp_path / "sound.jpg").write_bytes(ROCKET)
    (tmp_path / "short.jpg").write_bytes(SHORT["cut, EOI appended"])
    rows = [{"image_uri": name, "label": "a"} for name in ("sound.jpg", "short.jpg")]
    manifest = write_manifest(tmp_path / "m.csv", rows)
    root = tmp_path / "out"
    converted = run(["--manifest", str(manifest), "--output", str(root), "--no_progress"])
    assert converted.info.records == 2 and converted.info.errors == 0
    monkeypatch.undo()
    return root


@pytest.mark.parametrize("decode", ["sample", "all"])
def test_verify_finds_a_stored_jpeg_cut_short(old_version, decode):
    done = _run("verify", str(old_version), "--decode", decode)
    assert done.returncode == 1
    assert "premature end of data segment" in done.stderr and "Traceback" not in done.stderr


def test_verify_without_decoding_does_not_look_at_images(old_version):
    done = _run("verify", str(old_version), "--decode", "none")
    assert done.returncode == 0, done.stderr
