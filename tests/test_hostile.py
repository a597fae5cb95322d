"""A hostile corpus, built from sample/photos: every odd image converts correctly (checked by
decoding the records with TensorFlow against Pillow's view of the source), every bad row lands
in errors/ with its reason code, and the run never dies. Images crafted to stall or exhaust a
run (a frame its data cannot fill, thousands of scans, pixels that need gigabytes) become error
rows without a large decode."""

import io
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import PHOTOS, REPOSITORY, encode, error_rows, photo, python_path, write_manifest
from PIL import Image, ImageOps

from tfrecord_pipeline.dataset.metadata import INFO_FILE
from tfrecord_pipeline.dataset.versions import MARKER, marker_bytes
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image.config import VALIDATE_LEVELS, ImageConfig
from tfrecord_pipeline.transforms.image.images import normalise
from tfrecord_pipeline.transforms.image.jpeg import blocks, parse_jpeg
from tfrecord_pipeline.transforms.image.pixels import peak_bytes

pytestmark = pytest.mark.slow

SMALL = photo("coffee.png").resize((120, 80))
ODD_NAME = 'crème brûlée, "quoted" ø.jpg'
ODD_LABEL = 'café "noir", spécial'


def _exif_rotated(fmt: str = "JPEG") -> bytes:
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    return encode(SMALL, fmt, exif=exif.tobytes())


def _png_claiming(width: int, height: int, mode: str = "L") -> bytes:
    """A tiny PNG whose header claims a huge size: a decompression bomb."""
    png = bytearray(encode(Image.new(mode, (1, 1)), "PNG"))
    header = b"IHDR" + struct.pack(">II", width, height) + bytes(png[24:29])
    png[12:29] = header
    png[29:33] = struct.pack(">I", zlib.crc32(header))
    return bytes(png)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _tall_png(side: int) -> bytes:
    """A real side x side RGBA PNG, small on disk: the logo's middle row across the first row,
    then every row "same as the row above" (filter type 2), compressed as it is made."""
    logo = Image.open(PHOTOS / "logo.png").convert("RGBA")
    row = logo.crop((0, logo.height // 2, logo.width, logo.height // 2 + 1)).tobytes()
    stream = zlib.compressobj(1)
    data = [stream.compress(b"\x00" + (row * (side // logo.width + 1))[: 4 * side])]
    same = b"\x02" + bytes(4 * side)
    data += [stream.compress(same) for _ in range(side - 1)] + [stream.flush()]
    header = struct.pack(">IIBBBBB", side, side, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return b"\x89PNG\r\n\x1a\n" + b"".join(
        [_chunk(b"IHDR", header), _chunk(b"IDAT", b"".join(data)), _chunk(b"IEND", b"")]
    )


def _claiming(data: bytes, width: int, height: int) -> bytes:
    """The JPEG with a frame header that claims another size over the same scan data."""
    frame = data.index(b"\xff\xc2" if b"\xff\xc2" in data else b"\xff\xc0")
    return data[: frame + 5] + struct.pack(">HH", height, width) + data[frame + 9 :]


def _bits(bits: str) -> bytes:
    """Entropy-coded bytes: padded with ones, a zero stuffed after every 0xFF."""
    bits += "1" * (-len(bits) % 8)
    return bytes(int(bits[i : i + 8], 2) for i in range(0, len(bits), 8)).replace(
        b"\xff", b"\xff\x00"
    )


def _many_scans(progressive: bytes, count: int) -> bytes:
    """A progressive JPEG with `count` more AC scans of the luma that say nothing: each is a few
    end-of-band runs over every block (the attack in libjpeg-turbo's "Two Issues with the JPEG
    Standard"). The AC table defined first codes a run of 2^r to 2^(r+1)-1 blocks as r in four
    bits, then r bits."""
    info = parse_jpeg(progressive)
    left, bits = -(-info.width // 8) * -(-info.height // 8), ""
    while left:
        r = min(left.bit_length() - 1, 14)
        run = min(left, (2 << r) - 1)
        bits += format(r, "04b") + (format(run - (1 << r), f"0{r}b") if r else "")
        left -= run
    table = b"\xff\xc4\x00\x22\x10" + bytes([0, 0, 0, 15] + [0] * 12) + bytes(range(0, 0xF0, 0x10))
    scan = b"\xff\xda\x00\x08\x01\x01\x00\x01\x3f\x00" + _bits(bits)  # luma, AC 1-63
    end = progressive.rindex(b"\xff\xd9")
    return progressive[:end] + table + scan * count + progressive[end:]


def _gif() -> bytes:
    frames = [SMALL.convert("P"), SMALL.rotate(180).convert("P")]
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:])
    return buffer.getvalue()


def _gray16() -> bytes:
    pixels = (np.asarray(SMALL.convert("L"), np.uint16) * 257).astype(np.uint16)
    return encode(Image.fromarray(pixels), "PNG")


# file name → (bytes, label) of images that must convert
GOOD = {
    "progressive.jpg": lambda: encode(SMALL, quality=85, progressive=True),
    "cmyk.jpg": lambda: encode(SMALL.convert("CMYK"), quality=92),
    "gray.jpg": lambda: encode(SMALL.convert("L"), quality=92),
    "png_named.jpg": lambda: encode(SMALL, "PNG"),
    "logo_alpha.png": lambda: (PHOTOS / "logo.png").read_bytes(),
    "palette.png": lambda: encode(SMALL.convert("P"), "PNG"),
    "gray16.png": _gray16,
    "animated.gif": _gif,
    "image.bmp": lambda: encode(SMALL, "BMP"),
    "image.tiff": lambda: encode(SMALL, "TIFF"),
    "image.webp": lambda: encode(SMALL, "WEBP", lossless=True),
    "rotated.jpg": _exif_rotated,
    "rotated.png": lambda: _exif_rotated("PNG"),  # re-encoded, so rotated upright by default
    ODD_NAME: lambda: encode(SMALL, quality=80),
    "big.jpg": lambda: (PHOTOS / "retina.jpg").read_bytes(),
}
# file name → (bytes, a function making them, or None for a missing file; expected reason)
BAD = {
    "missing.jpg": (None, "missing_file"),
    "empty.jpg": (b"", "empty_file"),
    "notes.jpg": (b"just some text, really", "not_an_image"),
    "truncated.jpg": (encode(SMALL, quality=85)[:1500], "corrupt_image"),
    "truncated.png": (encode(SMALL, "PNG")[:900], "corrupt_image"),
    "photo.heic": (b"\x00\x00\x00\x18ftypheic" + b"\x00" * 64, "unsupported_format"),
    "bomb.png": (_png_claiming(30000, 30000), "image_too_large"),
    "frame_claim.jpg": (_claiming(encode(SMALL, quality=85), 13000, 13000), "corrupt_image"),
    "many_scans.jpg": (_many_scans(encode(SMALL, progressive=True), 2000), "too_many_scans"),
    "rgba_13000.png": (lambda: _tall_png(13000), "image_too_large"),  # 3 MB: made when used
}


def reference_pixels(data: bytes) -> np.ndarray:
    """What a person sees: EXIF-rotated, alpha on white, 16-bit scaled, first frame, RGB."""
    image = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
    if image.mode == "I;16":
        return np.repeat((np.asarray(image, np.float32) / 256)[..., None], 3, axis=2)
    rgba = image.convert("RGBA")
    flat = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    flat.alpha_composite(rgba)
    return np.asarray(flat.convert("RGB"), np.float32)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    (root / "img").mkdir()
    rows = []
    for name, make in GOOD.items():
        (root / "img" / name).write_bytes(make())
        rows.append({"image_uri": f"img/{name}", "label": ODD_LABEL if name == ODD_NAME else "ok"})
    for name, (data, _) in BAD.items():
        if data is not None:
            (root / "img" / name).write_bytes(data() if callable(data) else data)
        rows.append({"image_uri": f"img/{name}", "label": "bad"})
    (root / "img" / "copy.jpg").write_bytes((root / "img" / "progressive.jpg").read_bytes())
    rows += [
        {"image_uri": "img/copy.jpg", "label": "ok"},  # same bytes: duplicate_content
        {"image_uri": "img/gray.jpg", "label": "ok"},  # same key: duplicate_key
        {"image_uri": "img/image.bmp", "label": " ", "key": "no-label"},
        {"image_uri": "img/image.bmp", "label": "ok", "split": "no/split", "key": "bad-split"},
    ]
    return write_manifest(root / "manifest.csv", rows), root


def _examples(output: Path, info) -> dict:
    spec = {
        key: tf.io.FixedLenFeature([], {"int64": tf.int64, "string": tf.string}[dtype])
        for key, dtype in info.features.items()
    }
    files = [str(output / s.file) for split in info.splits.values() for s in split.shards]
    parsed = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(files)]
    return {e["image/source_id"].numpy().decode(): e for e in parsed}


def test_every_hostile_row_has_its_reason_and_every_odd_image_converts(hostile, convert):
    manifest, root = hostile
    output, info = convert(manifest, "--dedup", "--max_record_mb", "0.2", "--max_error_rate", "1")
    errors = {e["key"].removeprefix("img/"): e["reason"] for e in error_rows(output)}
    expected = {name: reason for name, (_, reason) in BAD.items()}
    expected.update(
        {
            "copy.jpg": "duplicate_content",
            "gray.jpg": "duplicate_key",
            "no-label": "bad_label",
            "bad-split": "bad_split",
            "big.jpg": "record_too_large",
        }
    )
    assert errors == expected
    assert info.rows_in == info.records + info.errors and info.records == len(GOOD) - 1
    examples = _examples(output, info)
    assert examples[f"img/{ODD_NAME}"]["image/class/text"].numpy().decode() == ODD_LABEL
    for name in GOOD:
        if name == "big.jpg":
            continue
        example = examples[f"img/{name}"]
        pixels = tf.io.decode_jpeg(example["image/encoded"]).numpy().astype(np.float32)
        assert example["image/format"].numpy() == b"JPEG"
        assert pixels.shape == (example["image/height"].numpy(), example["image/width"].numpy(), 3)
        if name == "rotated.jpg":  # pass-through by default: stored as is, EXIF and all
            assert example["image/encoded"].numpy() == (root / "img" / name).read_bytes()
            continue
        reference = reference_pixels((root / "img" / name).read_bytes())
        assert pixels.shape == reference.shape, name
        assert np.abs(pixels.mean(axis=(0, 1)) - reference.mean(axis=(0, 1))).max() < 4, name


def test_exif_transpose_resize_and_single_channel(hostile, convert, tmp_path):
    manifest, root = hostile
    flags = ("--max_error_rate", "1", "--exif_transpose", "--max_side", "60", "--channels", "1")
    output, info = convert(manifest, *flags)
    examples = _examples(output, info)
    rotated = examples["img/rotated.jpg"]
    pixels = tf.io.decode_jpeg(rotated["image/encoded"]).numpy()
    assert pixels.shape == (60, 40, 1)  # 120x80 landscape, rotated to portrait, long side 60
    upright = ImageOps.exif_transpose(Image.open(root / "img/rotated.jpg")).convert("L")
    reference = np.asarray(upright.resize((40, 60)), np.float32)
    assert np.abs(pixels[..., 0].astype(np.float32) - reference).mean() < 6
    assert all(e["image/channels"].numpy() == 1 for e in examples.values())
    assert info.errors_by_reason.get("record_too_large") is None  # big.jpg fits once resized


def test_raw_encoding_reads_back_with_decode_raw(hostile, convert):
    manifest, root = hostile
    output, info = convert(manifest, "--max_error_rate", "1", "--image_encoding", "raw")
    assert "image/raw" in info.features and "image/encoded" not in info.features
    example = _examples(output, info)["img/image.bmp"]
    shape = [example[f"image/{k}"].numpy() for k in ("height", "width", "channels")]
    pixels = tf.reshape(tf.io.decode_raw(example["image/raw"], tf.uint8), shape).numpy()
    assert example["image/format"].numpy() == b"RAW"
    assert np.array_equal(pixels, np.asarray(Image.open(root / "img/image.bmp").convert("RGB")))


def _mutations(data: bytes, rng) -> bytes:
    """One random damage to the headers or the start of the first scan."""
    end = min(len(data), data.index(b"\xff\xda") + 64)
    at = rng.randrange(2, end)
    choice = rng.randrange(4)
    if choice == 0:  # one byte changed
        return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    if choice == 1:  # a few bytes dropped
        return data[:at] + data[at + rng.randrange(1, 9) :]
    if choice == 2:  # a few bytes inserted
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5))) + data[at:]
    start = data.index(b"\xff\xc0" if b"\xff\xc0" in data else b"\xff\xc2")  # a second frame
    return data[:at] + data[start : start + 19] + data[at:]


def test_full_validation_survives_damaged_headers_and_sizes_match_libjpeg():
    """`validate="pixels"` hands libjpeg an output image sized from `parse_jpeg`'s frame header;
    whenever the walk accepts a file, libjpeg's own header parse must agree on the size."""
    rng = __import__("random").Random(5)
    sources = [
        encode(SMALL, quality=85),
        encode(SMALL, quality=85, progressive=True),
        encode(SMALL.convert("L"), quality=85),
        _exif_rotated(),
    ]
    accepted = 0
    for _ in range(1500):
        data = _mutations(rng.choice(sources), rng)
        try:
            info = parse_jpeg(data)
        except RowError:
            continue
        try:
            shape = tf.image.extract_jpeg_shape(data).numpy()
        except tf.errors.InvalidArgumentError:
            shape = None
        if shape is not None:
            assert (shape[0], shape[1]) == (info.height, info.width), data
        try:
            normalise(data, ImageConfig(validate="pixels", channels=info.components))
            accepted += 1
        except RowError:
            pass
    assert accepted > 100  # the damage spared enough files for the check to mean something


REAL_JPEG_PARAMS = [
    {},
    {"progressive": True},
    {"optimize": True},
    {"progressive": True, "subsampling": 0},
    {"subsampling": 1, "optimize": True},
    {"restart_marker_blocks": 1},
    {"restart_marker_rows": 1, "progressive": True},
    {"quality": 5},
]


@pytest.mark.parametrize("params", REAL_JPEG_PARAMS)
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_real_jpegs_of_every_kind_pass_both_checks_unchanged(params, mode):
    """The data bound and the decode's end-of-data check never refuse a real file: photos, flat
    grey (the smallest data per block, and exactly 128 where the decode's check looks), black,
    tiny and odd sizes, baseline and progressive, every subsampling, restart markers."""
    config = {"quality": 90, **params}
    for size in ((1, 1), (9, 17), (64, 48), (640, 1)):
        for source in (SMALL, Image.new("RGB", size, (128,) * 3), Image.new("RGB", size)):
            data = encode(source.resize(size).convert(mode), **config)
            for validate in VALIDATE_LEVELS:
                stored = normalise(data, ImageConfig(validate=validate, channels=len(mode)))
                assert stored.data == data, (size, validate)


@pytest.mark.parametrize(
    "mode, progressive", [("L", False), ("L", True), ("RGB", False), ("RGB", True)]
)
def test_the_smallest_jpegs_of_a_huge_flat_image_are_above_the_data_bound(mode, progressive):
    """The hard case: a flat grey 10000x10000 image with optimised Huffman tables is as small as
    a JPEG of that frame gets. Sequential, each block takes two bits (a one-bit DC code, a
    one-bit end of block): 390,625 bytes of scan data in grayscale, 585,938 at 4:2:0, twice the
    bound. Progressive, each DC scan takes one bit a block: the bound exactly, never less."""
    flat = Image.new(mode, (10000, 10000), (128,) * len(mode))
    data = encode(flat, quality=90, optimize=True, progressive=progressive)
    info = parse_jpeg(data)
    coded = sum(end - start for start, end in info.scans)
    assert coded * 8 >= (1 if progressive else 2) * blocks(info)
    for validate in VALIDATE_LEVELS:
        assert normalise(data, ImageConfig(validate=validate, channels=len(mode))).data == data


@pytest.mark.parametrize("params", REAL_JPEG_PARAMS)
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_a_frame_its_scan_data_cannot_fill_is_corrupt(params, mode):
    """A 64x64 image's scans under a header claiming 13000x13000 (libjpeg would warn, fill the
    rest with grey and hand training a 507 MB frame): under a bit a block, refused by the
    marker walk at every level. Claiming half as much again passes that bound; libjpeg's strict
    decode (--validate scans and pixels), in both modes, refuses it."""
    body = encode(SMALL.resize((64, 64)).convert(mode), **{"quality": 90, **params})
    config = {"channels": len(mode)}
    for validate in VALIDATE_LEVELS:
        with pytest.raises(RowError) as error:
            normalise(_claiming(body, 13000, 13000), ImageConfig(validate=validate, **config))
        assert error.value.reason is Reason.CORRUPT_IMAGE
        assert "cannot hold a 13000x13000 frame" in error.value.message
    taller = _claiming(body, 64, 96)
    # --validate markers trusts the scans: stored as it is; the levels that decode refuse it.
    assert normalise(taller, ImageConfig(validate="markers", **config)).data == taller
    for validate in ("scans", "pixels"):
        with pytest.raises(RowError) as error:
            normalise(taller, ImageConfig(validate=validate, **config))
        assert error.value.reason is Reason.CORRUPT_IMAGE
        assert "does not decode cleanly" in error.value.message


def test_a_jpeg_of_thousands_of_scans_is_refused_by_its_scan_count():
    """Real encoders write 10 scans (libjpeg's progression; 6 for grayscale); crafted files
    thousands, each a pass over every block. The limit is a flag, not a format rule."""
    progressive = encode(SMALL, quality=85, progressive=True)
    assert len(parse_jpeg(progressive).scans) == 10
    assert len(parse_jpeg(encode(SMALL.convert("L"), progressive=True)).scans) == 6
    crafted = _many_scans(progressive, 150)
    for validate in VALIDATE_LEVELS:
        with pytest.raises(RowError) as error:
            normalise(crafted, ImageConfig(validate=validate))
        assert error.value.reason is Reason.TOO_MANY_SCANS
        assert str(error.value) == "160 scans, over the limit of 100"
        raised = ImageConfig(validate=validate, max_scans=160)
        assert normalise(crafted, raised).data == crafted


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_decode_memory_counts_channels_and_bit_depth():
    """The limit is in bytes, from the header: a 50-megapixel RGB photo fits, resized or not, and
    so does a 13000x13000 RGB image, but not the same size in RGBA."""
    limit = ImageConfig().max_decode_bytes

    def peak(width: int, height: int, mode: str, **config) -> int:
        opened = Image.open(io.BytesIO(_png_claiming(width, height, mode)))
        return peak_bytes(opened, ImageConfig(**config))

    assert peak(8660, 5774, "RGB") <= limit and peak(8660, 5774, "RGB", max_side=1024) <= limit
    assert peak(13000, 13000, "RGB") <= limit < peak(13000, 13000, "RGBA")
    assert peak(5000, 5000, "I;16") > peak(5000, 5000, "L")


def test_a_huge_rgba_png_under_the_pixel_limit_is_refused_before_it_is_decoded(tmp_path):
    """13000x13000 is under --max_pixels, but decoding and flattening it in RGBA would take
    2 GB (2.6 GB of peak RSS before this limit): refused from its header, the process stays
    small."""
    path = tmp_path / "tall.png"
    path.write_bytes(_tall_png(13000))
    child = (  # VmHWM: this process's own peak (ru_maxrss would count the parent's at the fork)
        "import sys\n"
        "from tfrecord_pipeline.transforms.errors import RowError\n"
        "from tfrecord_pipeline.transforms.image.config import ImageConfig\n"
        "from tfrecord_pipeline.transforms.image.images import normalise\n"
        "try:\n"
        "    normalise(open(sys.argv[1], 'rb').read(), ImageConfig())\n"
        "except RowError as error:\n"
        "    print(error.reason.value, error.message)\n"
        "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", child, str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPOSITORY,
        env={"PYTHONPATH": python_path()},
    )
    refusal, peak_kb = result.stdout.splitlines()
    assert refusal.startswith("image_too_large 13000x13000 needs")
    assert int(peak_kb) < 300_000


def test_verify_applies_the_converters_jpeg_checks_with_the_recorded_limits(tmp_path, convert):
    """A record the conversion's own limits let through verifies; the same record is reported
    once the recorded limit is lower than its scans."""
    (tmp_path / "scans.jpg").write_bytes(_many_scans(encode(SMALL, progressive=True), 150))
    manifest = write_manifest(tmp_path / "m.csv", [{"image_uri": "scans.jpg", "label": "a"}])
    output, info = convert(manifest, "--max_scans", "200")
    assert info.records == 1 and verify(str(output), "all") == (1, [])
    recorded = json.loads((output / INFO_FILE).read_text())
    recorded["options"]["max_scans"] = 100
    (output / INFO_FILE).write_text(json.dumps(recorded))
    # Marked as its own, so verify reads it (the version folder is given: no pointer to match).
    (output / MARKER).write_bytes(marker_bytes((output / INFO_FILE).read_bytes()))
    problems = verify(str(output), "all")[1]
    assert any("too_many_scans: 160 scans, over the limit of 100" in p for p in problems)
