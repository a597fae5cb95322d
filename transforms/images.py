"""Image bytes in, bytes fit for `tf.io.decode_jpeg` out, decided by content, never by name.

A valid 8-bit Huffman-coded JPEG with the wanted channel count is stored byte-identical. Its
structure is checked by walking the JPEG markers (the entropy-coded data is skipped with a
C-speed regex), which catches the truncated and malformed files that make `decode_jpeg` fail in
the middle of a training run. `validate="full"` also decodes it, at 1/8 scale (libjpeg's DCT
scaling still reads every coefficient, so corrupt data is found at a fraction of the cost).
Everything else Pillow can read (PNG, GIF, BMP, TIFF, WebP, CMYK or grayscale JPEG) is decoded,
EXIF-rotated, flattened onto white if it has alpha, and re-encoded as JPEG.
"""

import io
import re
import struct
import warnings
from typing import NamedTuple

from PIL import Image, ImageOps

from transforms.errors import Reason, RowError

DEFAULT_MAX_PIXELS = 178_956_970  # Pillow's own decompression-bomb error threshold
DEFAULT_JPEG_QUALITY = 95
VALIDATE_MODES = ("structural", "full")

_SIGNATURES = (
    (b"\xff\xd8\xff", "jpeg"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
)
# Any marker other than a stuffed zero or a restart marker ends an entropy-coded segment.
_NEXT_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7]")
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # minus DHT, JPG, DAC
_STANDALONE = frozenset(range(0xD0, 0xD8)) | {0x01}
_HUFFMAN_8BIT_SOF = frozenset({0xC0, 0xC1, 0xC2})  # baseline, extended, progressive


class ImageConfig(NamedTuple):
    validate: str = "structural"
    channels: int = 3
    jpeg_quality: int = DEFAULT_JPEG_QUALITY
    max_pixels: int = DEFAULT_MAX_PIXELS


class StoredImage(NamedTuple):
    """The bytes that go into `image/encoded`, described truthfully."""

    data: bytes
    format: str
    height: int
    width: int
    channels: int


class JpegInfo(NamedTuple):
    sof: int  # the frame marker: 0xC0 baseline, 0xC2 progressive, ...
    precision: int
    height: int
    width: int
    components: int
    adobe_transform: int | None  # APP14 colour transform: 0 RGB/CMYK, 1 YCbCr, 2 YCCK


def sniff(data: bytes) -> str | None:
    """The container format from the leading bytes, or None."""
    for signature, name in _SIGNATURES:
        if data.startswith(signature):
            return name
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def _truncated() -> RowError:
    return RowError(Reason.CORRUPT_IMAGE, "truncated JPEG: data ends before the EOI marker")


def parse_jpeg(data: bytes) -> JpegInfo:
    """Walk every marker segment up to EOI; raises RowError if the structure is broken."""
    pos, end, frame, adobe = 2, len(data), None, None
    while True:
        if pos >= end:
            raise _truncated()
        if data[pos] != 0xFF:
            raise RowError(Reason.CORRUPT_IMAGE, f"corrupt JPEG: no marker at byte {pos}")
        while pos < end and data[pos] == 0xFF:
            pos += 1
        if pos >= end:
            raise _truncated()
        marker = data[pos]
        pos += 1
        if marker == 0xD9:
            break
        if marker in _STANDALONE:
            continue
        if pos + 2 > end:
            raise _truncated()
        (length,) = struct.unpack_from(">H", data, pos)
        if length < 2 or pos + length > end:
            raise _truncated() if length >= 2 else RowError(Reason.CORRUPT_IMAGE, "bad segment")
        segment = data[pos + 2 : pos + length]
        if marker in _SOF_MARKERS and frame is None:
            frame = _parse_sof(marker, segment)
        elif marker == 0xEE and segment.startswith(b"Adobe") and len(segment) >= 12:
            adobe = segment[11]
        pos += length
        if marker == 0xDA:
            if frame is None:
                raise RowError(Reason.CORRUPT_IMAGE, "corrupt JPEG: scan before frame header")
            found = _NEXT_MARKER.search(data, pos)
            if found is None:
                raise _truncated()
            pos = found.start()
    if frame is None:
        raise RowError(Reason.CORRUPT_IMAGE, "corrupt JPEG: no frame header")
    return frame._replace(adobe_transform=adobe)


def _parse_sof(marker: int, segment: bytes) -> JpegInfo:
    if len(segment) < 6:
        raise RowError(Reason.CORRUPT_IMAGE, "corrupt JPEG: short frame header")
    precision, height, width, components = struct.unpack_from(">BHHB", segment)
    if height == 0 or width == 0 or components not in (1, 3, 4):
        raise RowError(Reason.CORRUPT_IMAGE, f"corrupt JPEG: frame {width}x{height}x{components}")
    return JpegInfo(marker, precision, height, width, components, None)


def _is_passthrough(info: JpegInfo, channels: int) -> bool:
    return (
        info.sof in _HUFFMAN_8BIT_SOF
        and info.precision == 8
        and info.components == channels
        and info.adobe_transform != 2
    )


def _open(data: bytes, config: ImageConfig) -> Image.Image:
    """Open with our own pixel limit checked before any pixel is decoded."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data))
        except Image.DecompressionBombError as error:
            raise RowError(Reason.IMAGE_TOO_LARGE, str(error)) from None
        except (OSError, SyntaxError, ValueError) as error:
            raise RowError(Reason.CORRUPT_IMAGE, f"cannot open image: {error}") from None
    if image.width * image.height > config.max_pixels:
        raise RowError(
            Reason.IMAGE_TOO_LARGE,
            f"{image.width}x{image.height} is over the limit of {config.max_pixels} pixels",
        )
    return image


def _decode(image: Image.Image) -> None:
    try:
        image.load()
    except (OSError, SyntaxError, ValueError, struct.error) as error:
        raise RowError(Reason.CORRUPT_IMAGE, f"cannot decode image: {error}") from None


def check_jpeg_decodes(data: bytes, info: JpegInfo, config: ImageConfig) -> None:
    """A real decode at reduced size: every coefficient read, an eighth of the pixels made."""
    image = _open(data, config)
    image.draft(image.mode, (max(1, info.width // 8), max(1, info.height // 8)))
    _decode(image)


def _to_mode(image: Image.Image, channels: int) -> Image.Image:
    """Pixels as 8-bit L or RGB; alpha flattened onto white, 16-bit scaled, not clipped."""
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        image = image.convert("I").point(lambda value: value * (1 / 256)).convert("L")
    if image.mode == "P" or image.mode.endswith(("A", "a")) or "transparency" in image.info:
        rgba = image.convert("RGBA")
        image = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image.alpha_composite(rgba)
    return image.convert("L" if channels == 1 else "RGB")


def reencode(data: bytes, config: ImageConfig) -> StoredImage:
    """Decode anything Pillow reads (first frame of animations) and store it as JPEG."""
    image = _open(data, config)
    _decode(image)
    try:
        image = _to_mode(ImageOps.exif_transpose(image), config.channels)
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=config.jpeg_quality)
    except (OSError, ValueError) as error:
        raise RowError(Reason.UNSUPPORTED_FORMAT, f"cannot convert image: {error}") from None
    return StoredImage(buffer.getvalue(), "JPEG", image.height, image.width, config.channels)


def normalise(data: bytes, config: ImageConfig) -> StoredImage:
    """The bytes to store for one source image; raises RowError with the reason it cannot be."""
    if not data:
        raise RowError(Reason.EMPTY_FILE, "the file is empty")
    kind = sniff(data)
    if kind is None:
        raise RowError(Reason.NOT_AN_IMAGE, f"not an image (starts with {data[:8]!r})")
    if kind != "jpeg":
        return reencode(data, config)
    info = parse_jpeg(data)
    if not _is_passthrough(info, config.channels):
        return reencode(data, config)
    if info.width * info.height > config.max_pixels:
        raise RowError(Reason.IMAGE_TOO_LARGE, f"{info.width}x{info.height} is over the limit")
    if config.validate == "full":
        check_jpeg_decodes(data, info, config)
    return StoredImage(data, "JPEG", info.height, info.width, info.components)
