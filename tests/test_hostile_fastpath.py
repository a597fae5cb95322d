"""Hostile JPEGs against the fast path (libjpeg-turbo + libvips): whatever it takes must come out
as Pillow's path would make it (same shape, same turn, close pixels), and whatever it must not
decide (EXIF it cannot read, a shrink libvips refuses) must be decided exactly as Pillow's path
decides it, error rows included; a file libjpeg warns about is an error row on every path."""

import hashlib
import io
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import simplejpeg
from conftest import REPOSITORY, encode, photo, python_path, write_manifest
from PIL import Image, ImageOps

from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image import fastpath, pixels
from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.image.images import normalise
from tfrecord_pipeline.transforms.image.jpeg import coefficient_bytes, parse_jpeg
from tfrecord_pipeline.transforms.tfrecord.proto.example_pb2 import Example
from tfrecord_pipeline.transforms.tfrecord.records import read_records

ASTRONAUT = photo("astronaut.png")  # fine detail: misplaced pixels show
RESIZE = ImageConfig(resize_short_side=100)


def _pillows(data: bytes, config: ImageConfig):
    """What Pillow's path makes of the file, or the reason it refuses it."""
    try:
        return pixels.convert_pixels(data, config, coefficient_bytes(parse_jpeg(data)))
    except RowError as error:
        return error.reason


def _ours(data: bytes, config: ImageConfig):
    try:
        return normalise(data, config)
    except RowError as error:
        return error.reason


def _decoded(stored) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(stored.data)), np.float64)


def _exif(order: bytes, *entries: tuple[int, int, bytes]) -> bytes:
    """An APP1 Exif segment whose IFD0 holds `entries` (tag, type, 4-byte value), count 1."""
    fmt = "<" if order == b"II" else ">"
    tiff = order + struct.pack(fmt + "HIH", 42, 8, len(entries))
    tiff += b"".join(struct.pack(fmt + "HHI", tag, kind, 1) + value for tag, kind, value in entries)
    body = b"Exif\x00\x00" + tiff + bytes(4)
    return b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body


XMP = b"\xff\xe1\x00\x2chttp://ns.adobe.com/xap/1.0/\x00<x:xmpmeta/>\x00"
TURNED = {  # EXIF that Pillow reads as "turn 90 degrees" and a plain reading could miss
    "xmp before exif": XMP + _exif(b"II", (0x0112, 3, b"\x06\x00\x00\x00")),
    "long, little-endian": _exif(b"II", (0x0112, 4, struct.pack("<I", 6))),
    "long, big-endian": _exif(b"MM", (0x0112, 4, struct.pack(">I", 6))),
    "signed short": _exif(b"MM", (0x0112, 8, b"\x00\x06\x00\x00")),
    "the tag twice": _exif(
        b"II", (0x0112, 3, b"\x01\x00\x00\x00"), (0x0112, 3, b"\x06\x00\x00\x00")
    ),
}


@pytest.mark.parametrize("segment", TURNED.values(), ids=TURNED)
def test_exif_orientation_pillow_reads_is_read_alike_or_left_to_pillow(segment):
    """Pillow turns these; the fast path, taking them for upright, stored them unturned. It
    turns those whose tag the marker walk reads (as Pillow reads it) and leaves the rest to
    Pillow's path."""
    data = encode(photo("chelsea.png"), quality=90)
    data = data[:2] + segment + data[2:]
    orientation = parse_jpeg(data).orientation
    assert orientation in (0, 6)  # 0: a tag only Pillow's reader can tell
    assert fastpath.covers(parse_jpeg(data), RESIZE) == (orientation == 6)
    stored = normalise(data, RESIZE)
    if orientation == 0:
        assert stored == pixels.convert_pixels(data, RESIZE)
    assert (stored.width, stored.height, stored.orientation, stored.applied) == (100, 150, 6, 6)


@pytest.mark.parametrize("resample", ["bilinear", "bicubic", "lanczos"])
@pytest.mark.parametrize("size", [(257, 256), (129, 400), (400, 137)])
def test_a_dct_scaled_decode_is_not_stretched_by_its_part_pixel(size, resample):
    """Decoded at 1/8, 257 columns are 33, the last one pixel wide: shrunk as if it were a
    whole one, the image was stretched by up to a pixel: a mean error of 13-20 against the full
    decode resized with the same filter, 4-7 measured on the part-pixel's true width."""
    data = encode(ASTRONAUT.resize(size, Image.Resampling.BOX), quality=92, subsampling=0)
    config = ImageConfig(resize_short_side=min(size) // 8, resample=resample, encoding="raw")
    assert fastpath.covers(parse_jpeg(data), config)
    stored = normalise(data, config)
    full = Image.open(io.BytesIO(data))
    reference = full.resize((stored.width, stored.height), Image.Resampling[resample.upper()])
    error = np.abs(np.frombuffer(stored.data, np.uint8) - np.asarray(reference, np.float64).ravel())
    assert error.mean() < 8


@pytest.mark.parametrize("orientation", [1, 3, 6])
@pytest.mark.parametrize("size", [(257, 256), (129, 400)])
def test_pillows_path_is_not_stretched_by_the_part_pixel_either(size, orientation):
    """Pillow's path decodes at 1/8 too (draft) and resized without the box draft gives; it
    now resizes on the file's grid, measured on the box, then turns the image (turned first,
    the part-pixel's edge moves: to the left for 3, the top for 6)."""
    data = encode(ASTRONAUT.resize(size, Image.Resampling.BOX), quality=92, subsampling=0)
    data = data[:2] + _exif(b"II", (0x0112, 3, struct.pack("<HH", orientation, 0))) + data[2:]
    config = ImageConfig(resize_short_side=min(size) // 8, resample="box", encoding="raw")
    assert not fastpath.covers(parse_jpeg(data), config)  # box: Pillow's filter alone
    stored = normalise(data, config)
    upright = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
    reference = upright.resize((stored.width, stored.height), Image.Resampling.BOX)
    error = np.abs(np.frombuffer(stored.data, np.uint8) - np.asarray(reference, np.float64).ravel())
    assert stored.orientation == orientation and error.mean() < 8


@pytest.mark.parametrize("resample", ["bilinear", "bicubic", "lanczos"])
def test_a_shrink_too_large_for_libvips_is_made_by_pillow(resample):
    """A 1-pixel-wide strip 12000 tall to --max_side 4 cannot be decoded smaller, and libvips'
    reduce refuses a factor of 3000 ("reduce factor too large"): it raised out of the row."""
    strip = Image.linear_gradient("L").resize((1, 12000))
    data = encode(strip, quality=90)
    config = ImageConfig(max_side=4, resample=resample)
    assert fastpath.covers(parse_jpeg(data), config)
    assert normalise(data, config) == pixels.convert_pixels(data, config)


@pytest.mark.parametrize("progressive", [False, True])
def test_a_decode_over_the_memory_limit_is_the_error_row_pillows_path_gives(progressive):
    """Refused from the header's size before libjpeg-turbo allocates anything, with the reason
    Pillow's path gives (a progressive file also holds all its coefficients)."""
    data = encode(Image.new("L", (4000, 2000), 90), quality=90, progressive=progressive)
    config = ImageConfig(resize_short_side=256, max_decode_bytes=1 << 20)
    assert fastpath.covers(parse_jpeg(data), config)
    assert _ours(data, config) == _pillows(data, config) == Reason.IMAGE_TOO_LARGE


def _damaged(data: bytes) -> dict[str, bytes]:
    info = parse_jpeg(data)
    start, end = info.scans[-1]
    middle = (start + end) // 2
    return {
        "short scan, EOI kept": data[:middle] + data[end:],
        "bit flipped": data[:middle] + bytes([data[middle] ^ 0x10]) + data[middle + 1 :],
        "zeros over the scan": data[:middle] + bytes(64) + data[middle + 64 :],
        "bytes before EOI": data[:-2] + b"\x12\x34" + data[-2:],
        "restart marker in the data": data[:middle] + b"\xff\xd3" + data[middle:],
    }


KINDS = {
    "baseline 4:2:0": encode(ASTRONAUT, quality=90),
    "progressive": encode(ASTRONAUT, quality=90, progressive=True),
    "optimised 4:4:4": encode(ASTRONAUT, quality=90, optimize=True, subsampling=0),
    "grey": encode(ASTRONAUT.convert("L"), quality=90),
    "restart intervals": encode(ASTRONAUT, quality=90, restart_marker_blocks=3),
    "4:1:1": simplejpeg.encode_jpeg(np.asarray(ASTRONAUT), 90, "RGB", "411"),
}
CONFIGS = [
    RESIZE,
    ImageConfig(encoding="raw", channels=1),
    ImageConfig(max_side=64, channels=3),
    ImageConfig(max_side=64, resample="nearest"),  # Pillow's path
    ImageConfig(),  # stored as it is
]


def _warns(data: bytes) -> bool:
    try:
        simplejpeg.decode_jpeg(data, "GRAY", strict=True)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize("kind", KINDS)
def test_damaged_scans_are_error_rows_on_every_path_exactly_when_libjpeg_warns(kind):
    """A scan cut short with its EOI kept is always refused; a flipped bit or zeros can still
    be valid data, and are then converted as Pillow's path converts them."""
    for name, data in _damaged(KINDS[kind]).items():
        warns = _warns(data)
        assert warns or name != "short scan, EOI kept"
        for config in CONFIGS:
            ours = _ours(data, config)
            if warns:
                assert ours == Reason.CORRUPT_IMAGE, (name, config)
            elif config.max_side and config.resample == "nearest":
                assert ours == _pillows(data, config), (name, config)
            else:
                assert not isinstance(ours, Reason), (name, config)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("size", [(1, 1), (1, 17), (17, 1), (7, 9), (16, 16), (255, 257)])
def test_every_layout_and_tiny_size_has_pillows_shape(kind, size):
    data = normalise(KINDS[kind], ImageConfig(max_side=max(size), encoding="raw"))
    small = np.frombuffer(data.data, np.uint8).reshape(data.height, data.width, -1)
    data = encode(Image.fromarray(small.squeeze(2) if small.shape[2] == 1 else small), quality=90)
    for target in sorted({1, 2, min(size), min(size) + 1, -(-min(size) // 8)}):
        config = ImageConfig(resize_short_side=target, channels=1 if "grey" not in kind else 3)
        assert normalise(data, config)[1:] == _pillows(data, config)[1:]


def _hashes(count: int = 12) -> list[str]:
    configs = [RESIZE, ImageConfig(max_side=50, encoding="raw", resample="lanczos")]
    images = [encode(ASTRONAUT.crop((i, i, 300 + 7 * i, 290)), quality=90) for i in range(count)]
    jobs = [(data, config) for data in images for config in configs]
    with ThreadPoolExecutor(6) as pool:
        threaded = list(pool.map(lambda job: normalise(*job).data, jobs))
    assert threaded == [normalise(*job).data for job in jobs]
    return [hashlib.sha256(data).hexdigest() for data in threaded]


def test_bytes_are_the_same_across_threads_and_a_fresh_process():
    script = "import test_hostile_fastpath as t; print(t._hashes())"
    fresh = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPOSITORY / "tests",
        capture_output=True,
        text=True,
        env={"PYTHONPATH": python_path(REPOSITORY / "tests")},
        check=True,
    )
    assert fresh.stdout.strip() == str(_hashes())


def test_a_conversion_of_hostile_jpegs_turns_and_shrinks_each_as_pillow_would(tmp_path):
    files = {
        "turned.jpg": (encode(photo("chelsea.png"), quality=90), TURNED["long, big-endian"]),
        "strip.jpg": (encode(Image.linear_gradient("L").resize((1, 12000)), quality=90), b""),
        "wide.jpg": (encode(ASTRONAUT.resize((257, 256)), quality=90), b""),
    }
    rows = []
    for name, (data, segment) in files.items():
        (tmp_path / name).write_bytes(data[:2] + segment + data[2:])
        rows.append({"image_uri": name, "label": name.split(".")[0]})
    manifest = write_manifest(tmp_path / "manifest.csv", rows)
    output = tmp_path / "out"
    argv = ["--manifest", str(manifest), "--output", str(output), "--no_progress"]
    converted = run([*argv, "--max_side", "4"])
    sizes = {}
    for split in converted.info.splits.values():
        for shard in split.shards:
            for _, record in read_records((Path(converted.folder) / shard.file).read_bytes()):
                feature = Example.FromString(record).features.feature
                name = feature["image/filename"].bytes_list.value[0].decode()
                sizes[name] = (
                    feature["image/width"].int64_list.value[0],
                    feature["image/height"].int64_list.value[0],
                )
    assert sizes == {"turned.jpg": (3, 4), "strip.jpg": (1, 4), "wide.jpg": (4, 4)}
