"""The fast path (libjpeg-turbo and libvips) against Pillow's: what it takes, what it leaves to
Pillow, and that what it makes is what the options ask for."""

import io

import numpy as np
import pytest
from conftest import encode, photo
from PIL import Image

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image import fastpath, pixels
from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.image.images import normalise
from tfrecord_pipeline.transforms.image.jpeg import parse_jpeg

PHOTO = photo("chelsea.png")  # 451x300
RESIZE = ImageConfig(resize_short_side=128, jpeg_quality=90)


def _decoded(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)))


def _short_scan(data: bytes) -> bytes:
    """The JPEG with its scan cut at 90% and its EOI kept: structurally whole, and libjpeg
    warns (premature end of data segment) and fills the rest with grey."""
    start, end = parse_jpeg(data).scans[-1]
    return data[: start + (end - start) * 9 // 10] + data[end:]


@pytest.mark.parametrize("progressive", [False, True])
def test_a_resize_takes_the_fast_path_and_is_the_same_every_time(progressive):
    data = encode(PHOTO, quality=92, progressive=progressive)
    assert fastpath.covers(parse_jpeg(data), RESIZE)
    stored = normalise(data, RESIZE)
    assert (stored.format, stored.height, stored.width, stored.channels) == ("JPEG", 128, 192, 3)
    assert normalise(data, RESIZE).data == stored.data
    reference = np.asarray(PHOTO.resize((192, 128), Image.Resampling.LANCZOS), np.float64)
    assert np.abs(_decoded(stored.data) - reference).mean() < 4


def test_filters_libvips_lacks_and_cmyk_jpegs_stay_on_pillows_path():
    data = encode(PHOTO, quality=92)
    for resample in ("nearest", "box", "hamming"):
        assert not fastpath.covers(parse_jpeg(data), RESIZE._replace(resample=resample))
        assert fastpath.covers(parse_jpeg(data), ImageConfig(encoding="raw", resample=resample))
    assert not fastpath.covers(parse_jpeg(encode(PHOTO.convert("CMYK"))), RESIZE)


@pytest.mark.parametrize("orientation", range(2, 9))
def test_a_rotated_jpeg_is_resized_on_the_fast_path_then_turned_as_pillow_turns_it(orientation):
    """Its one decode is the fast path's: the pixels are the upright file's, resized on the
    file's grid, then moved as Pillow's transpose moves them."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    rotated = encode(PHOTO, quality=92, exif=exif.tobytes())
    raw = RESIZE._replace(encoding="raw")
    assert fastpath.covers(parse_jpeg(rotated), raw)
    for mode in ("L", "RGB"):
        options = raw._replace(channels=len(mode))
        upright = normalise(encode(PHOTO, quality=92), options)
        expected = Image.frombytes(mode, (upright.width, upright.height), upright.data)
        expected = expected.transpose(pixels._TURNS[orientation])
        stored = normalise(rotated, options)
        assert stored.data == expected.tobytes()
    assert (stored.width, stored.height) == expected.size
    assert (stored.source_width, stored.source_height) == PHOTO.size
    assert (stored.orientation, stored.applied) == (orientation, orientation)
    jpeg = normalise(rotated, RESIZE)
    assert (jpeg.width, jpeg.height) == expected.size == Image.open(io.BytesIO(jpeg.data)).size


@pytest.mark.parametrize(
    "config",
    [RESIZE, RESIZE._replace(resample="nearest"), ImageConfig(), ImageConfig(encoding="raw")],
)
def test_a_file_libjpeg_warns_about_is_an_error_row_on_every_path(config):
    """The fast path's decode, the check before Pillow's and a JPEG stored as it is alike."""
    data = _short_scan(encode(PHOTO, quality=92))
    with pytest.raises(RowError) as raised:
        normalise(data, config)
    assert raised.value.reason is Reason.CORRUPT_IMAGE
    assert "premature end of data segment" in raised.value.message


@pytest.mark.parametrize("mode", ["RGB", "L"])
@pytest.mark.parametrize("channels", [1, 3])
def test_raw_and_channel_changes_decode_to_the_stored_shape(mode, channels):
    data = encode(PHOTO.convert(mode), quality=92)
    raw = normalise(data, ImageConfig(encoding="raw", channels=channels, max_side=100))
    assert (raw.format, raw.height, raw.width, raw.channels) == ("RAW", 67, 100, channels)
    assert len(raw.data) == 67 * 100 * channels
    jpeg = normalise(data, ImageConfig(channels=channels, max_side=100))
    assert _decoded(jpeg.data).shape[:2] == (67, 100)
    assert Image.open(io.BytesIO(jpeg.data)).mode == ("RGB" if channels == 3 else "L")


@pytest.mark.parametrize("resample", ["bilinear", "bicubic", "lanczos"])
def test_each_libvips_kernel_antialiases_as_pillows_filter_of_its_name(resample):
    """A grating finer than the output's pixels shrinks to flat grey, as Pillow's does."""
    stripes = np.round(127.5 + 127.5 * np.cos(np.pi * np.arange(400) / 1.2)).astype(np.uint8)
    grating = np.repeat(np.repeat(stripes[None, :, None], 300, 0), 3, 2)
    ours = fastpath.resample(grating, (100, 75), fastpath.VIPS_KERNELS[resample])
    pillows = Image.fromarray(grating).resize((100, 75), Image.Resampling[resample.upper()])
    assert ours.shape == (75, 100, 3) and ours.std() < 3 and np.asarray(pillows).std() < 3


def test_pixels_adds_a_full_size_decode_only_where_the_fast_path_makes_a_smaller_one():
    """The fast path's decode is the `pixels` check where it is full size in the file's own
    colours; a DCT-scaled one (a resize) or a grey one of a colour file is not, and the
    full-size check still comes first, held to the memory limit as such."""
    data = encode(PHOTO, quality=92)
    info = parse_jpeg(data)
    assert fastpath.decodes_whole(info, ImageConfig(encoding="raw"))
    assert not fastpath.decodes_whole(info, RESIZE)
    assert not fastpath.decodes_whole(info, ImageConfig(channels=1))
    limit = RESIZE._replace(max_decode_bytes=300_000)  # the 1/2 decode fits, 451x300 RGB not
    assert normalise(data, limit).height == 128
    with pytest.raises(RowError) as error:
        normalise(data, limit._replace(validate="pixels"))
    assert error.value.reason is Reason.IMAGE_TOO_LARGE


@pytest.mark.parametrize("kernel", sorted(fastpath.VIPS_KERNELS.values()))
def test_a_resample_is_the_bytes_libvips_own_sink_makes(kernel):
    # Fetched in this thread, strip by strip, not through write_to_memory (which starts
    # libvips' thread pool for every image). reduce's rows depend on where a request begins:
    # the whole image fetched at once gives other rows for this shrink.
    import pyvips

    pixels = np.random.default_rng(0).integers(0, 256, (507, 405, 3), np.uint8)
    image = pyvips.Image.new_from_memory(pixels.data, 405, 507, 3, "uchar")
    reduced = image.reduce(405 / 256, 507 / 320, kernel=kernel)
    sink = np.frombuffer(reduced.write_to_memory(), np.uint8).reshape(320, 256, 3)
    assert np.array_equal(fastpath.resample(pixels, (256, 320), kernel), sink)
    whole = pyvips.Region.new(reduced).fetch(0, 0, 256, 320)
    assert kernel != "linear" or whole != sink.tobytes()
