"""transforms/image/images.py: an image file's bytes to the image stored (JPEGs kept byte for
byte, other formats re-encoded), the structural and full JPEG checks, and sniffing."""

import io
import subprocess
import sys

import pytest
from conftest import PHOTOS, encode, photo
from PIL import Image

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image import fastpath
from tfrecord_pipeline.transforms.image.config import VALIDATE_LEVELS, ImageConfig
from tfrecord_pipeline.transforms.image.images import normalise, sniff
from tfrecord_pipeline.transforms.image.jpeg import parse_jpeg
from tfrecord_pipeline.transforms.image.scans import check_scans

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


def test_the_scans_check_decodes_and_catches_garbage_inside_the_scan():
    data = bytearray(encode(SMALL, quality=80))
    normalise(bytes(data), ImageConfig(validate="scans"))
    scan = parse_jpeg(bytes(data)) and data.index(b"\xff\xda")
    data[scan + 20 : scan + 24] = b"\xff\xc4\x00\x02"  # a bogus marker inside entropy data
    with pytest.raises(RowError):
        normalise(bytes(data), ImageConfig(validate="scans"))


def _corrupt_scan(data: bytes) -> bytes:
    """The JPEG with bytes in the middle of its scan data overwritten by all-one bits (0xFF
    stuffed with 0x00, no marker, so its markers still walk to EOI and its scan keeps its
    length): a bad Huffman code."""
    info = parse_jpeg(data)
    start, end = info.scans[0]
    middle = (start + end) // 2
    return data[:middle] + b"\xff\x00" * 16 + data[middle + 32 :]


@pytest.mark.parametrize("level", VALIDATE_LEVELS)
def test_each_level_s_catch(level):
    """`markers` stores a JPEG whose scan data is corrupt as it is (what it trusts); `scans`
    and `pixels` decode it and refuse it, in libjpeg's words."""
    data = _corrupt_scan(encode(SMALL, quality=80))
    assert normalise(data, ImageConfig(validate="markers")).data == data
    if level == "markers":
        return
    with pytest.raises(RowError) as error:
        normalise(data, ImageConfig(validate=level))
    assert error.value.reason is Reason.CORRUPT_IMAGE and "does not decode" in str(error.value)


def _rotated(data: bytes) -> bytes:
    """The JPEG with an EXIF orientation of 6 (a quarter turn) put after its SOI."""
    exif = Image.Exif()
    exif[0x0112] = 6
    segment = exif.tobytes()  # from its "Exif\0\0" on
    return data[:2] + b"\xff\xe1" + (len(segment) + 2).to_bytes(2, "big") + segment + data[2:]


ROCKET_CUT = (PHOTOS / "rocket.jpg").read_bytes()
ROCKET_CUT = ROCKET_CUT[: len(ROCKET_CUT) * 7 // 10].removesuffix(b"\xff") + b"\xff\xd9"
RESIZE = ImageConfig(resize_short_side=128)
CONVERSIONS = {
    "resized": (ROCKET_CUT, RESIZE),
    "resized, rotated": (_rotated(ROCKET_CUT), RESIZE),
    "resized by a filter only Pillow has": (ROCKET_CUT, RESIZE._replace(resample="hamming")),
    "raw pixels": (ROCKET_CUT, ImageConfig(encoding="raw")),
    "one channel": (ROCKET_CUT, ImageConfig(channels=1)),
}


@pytest.mark.parametrize("level", VALIDATE_LEVELS)
def test_a_jpeg_cut_short_with_an_eoi_is_stored_only_as_it_is_at_markers(level):
    """Stored as it is, the cut file is refused by the decode of `scans` and `pixels` and
    kept at `markers` (docs/images.md#validation-levels); decoded anyway (a resize on the fast
    path or Pillow's, raw, another channel count), it is refused at every level, by that
    decode or the check before Pillow's."""
    config = ImageConfig(validate=level)
    if level == "markers":
        assert normalise(ROCKET_CUT, config).data == ROCKET_CUT
    else:
        with pytest.raises(RowError, match="premature end of data segment"):
            normalise(ROCKET_CUT, config)
    assert fastpath.covers(parse_jpeg(CONVERSIONS["resized, rotated"][0]), RESIZE)
    for name, (data, options) in CONVERSIONS.items():
        with pytest.raises(RowError, match="premature end of data segment") as error:
            normalise(data, options._replace(validate=level))
        assert error.value.reason is Reason.CORRUPT_IMAGE, name


def test_the_pixels_check_decodes_at_full_size_within_the_memory_limit():
    """At `pixels` the whole frame is made, and held to --max_decode_mb as such: an image the
    1/8 decode of `scans` fits in is refused before decoding when its full decode does not."""
    data = encode(photo().resize((1024, 1024)), quality=80)
    limit = ImageConfig(max_decode_bytes=2**20)  # 1 MB: the 1/8 luma fits, 3 MB of RGB not
    assert normalise(data, limit._replace(validate="scans")).data == data
    with pytest.raises(RowError) as error:
        normalise(data, limit._replace(validate="pixels"))
    assert error.value.reason is Reason.IMAGE_TOO_LARGE


def _without_segments(data: bytes, marker: bytes) -> bytes:
    """The JPEG with every segment of one marker type before the first scan cut out."""
    while (at := data.find(marker, 0, data.index(b"\xff\xda"))) != -1:
        data = data[:at] + data[at + 2 + int.from_bytes(data[at + 2 : at + 4], "big") :]
    return data


@pytest.mark.parametrize("validate", ["scans", "pixels"])
def test_the_decoding_levels_reject_what_only_a_decoder_sees(validate):
    no_tables = _without_segments(encode(SMALL, quality=80), b"\xff\xdb")  # no DQT segment
    parse_jpeg(no_tables)  # structurally sound
    with pytest.raises(RowError) as error:
        normalise(no_tables, ImageConfig(validate=validate))
    assert error.value.reason is Reason.CORRUPT_IMAGE and "does not decode" in str(error.value)


@pytest.mark.parametrize("progressive", [False, True])
@pytest.mark.parametrize("cut", [0.3, 0.9, -2])
def test_the_decode_itself_rejects_truncated_scans(progressive, cut):
    data = encode(SMALL, quality=80, progressive=progressive)
    info = parse_jpeg(data)
    check_scans(data, info)
    with pytest.raises(RowError, match="does not decode cleanly"):
        check_scans(data[: int(len(data) * cut) if cut > 0 else len(data) + cut], info)


@pytest.mark.parametrize("size", [(1, 1), (5, 3), (9, 17), (640, 1)])
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_full_validation_keeps_odd_sized_jpegs(size, mode):
    for progressive in (False, True):
        data = encode(SMALL.resize(size).convert(mode), quality=90, progressive=progressive)
        assert normalise(data, ImageConfig(validate="pixels", channels=len(mode))).data == data


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


def test_a_jpeg_claiming_more_pixels_a_byte_of_scan_data_than_the_limit_is_too_compressed():
    data = encode(SMALL, quality=80)
    ((start, end),) = parse_jpeg(data).scans
    at_the_limit = -(-64 * 48 // (end - start))  # pixels a byte, rounded up
    normalise(data, ImageConfig(max_pixels_per_byte=at_the_limit))
    with pytest.raises(RowError) as error:
        normalise(data, ImageConfig(max_pixels_per_byte=at_the_limit - 1))
    assert error.value.reason is Reason.TOO_COMPRESSED


def test_a_jpeg_holding_more_metadata_than_the_limit_is_refused():
    data = encode(SMALL, quality=80)
    metadata = parse_jpeg(data).metadata
    normalise(data, ImageConfig(max_metadata_bytes=metadata))
    with pytest.raises(RowError) as error:
        normalise(data, ImageConfig(max_metadata_bytes=metadata - 1))
    assert error.value.reason is Reason.TOO_MUCH_METADATA


@pytest.mark.parametrize(
    ("options", "loaded"),
    [("", {"simplejpeg"}), ("resize_short_side=64", {"simplejpeg", "pyvips", "PIL"})],
)
def test_writers_preload_libvips_and_pillow_only_for_runs_that_decode(options, loaded):
    # A fresh interpreter: this one has loaded everything. Stored as they are, JPEGs need
    # libjpeg's check alone.
    script = (
        "import sys; from tfrecord_pipeline.transforms.image.config import ImageConfig; "
        "from tfrecord_pipeline.transforms.image.images import preload; "
        f"preload(ImageConfig({options})); "
        "print(*sorted({m.split('.')[0] for m in sys.modules} & {'simplejpeg', 'pyvips', 'PIL'}))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == sorted(loaded)
