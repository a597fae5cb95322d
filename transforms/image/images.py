"""Image bytes in, bytes fit for `tf.io.decode_jpeg` (or raw pixels) out, decided by content.

A valid 8-bit Huffman-coded JPEG with the wanted channel count, small enough and (with
`exif_transpose`) upright, is stored byte-identical after a structural check (`jpeg.py`);
`validate="full"` also decodes it, luma only at 1/8 scale (libjpeg still reads every
coefficient of every component, so corrupt data is found at a fraction of the cost). Everything
else Pillow reads (PNG 8/16-bit, palette, alpha; GIF's first frame; BMP; TIFF; WebP; CMYK, YCCK
or grayscale JPEG) is decoded, EXIF-rotated, flattened onto the background if it has alpha,
resized if asked, and stored as JPEG or raw pixels, by `pixels.py` (Pillow), which is imported
only when an image is decoded.
"""

import struct
from typing import NamedTuple

from transforms.errors import Reason, RowError
from transforms.image.jpeg import DECODABLE, HUFFMAN_8BIT, JpegInfo, coefficient_bytes, parse_jpeg

DEFAULT_MAX_PIXELS = 178_956_970  # Pillow's own decompression-bomb error threshold
# Every scan is a pass over its blocks, and a crafted JPEG can hold thousands of near-empty
# ones. Real encoders write 1-4 scans sequential, 10 progressive (libjpeg; 6 for grayscale);
# mozjpeg picks its scans from a script of 64.
DEFAULT_MAX_SCANS = 100
# Memory one image may hold while it is decoded and converted (see pixels.peak_bytes): a
# 50-megapixel RGB photo needs a quarter of it, a 13000x13000 RGBA PNG nearly twice as much.
DEFAULT_MAX_DECODE_BYTES = 1 << 30
DEFAULT_JPEG_QUALITY = 95
VALIDATE_MODES = ("structural", "full")
ENCODINGS = ("jpeg", "raw")
RESAMPLE_FILTERS = ("nearest", "box", "bilinear", "hamming", "bicubic", "lanczos")  # Pillow's
_SIGNATURES = (
    (b"\xff\xd8\xff", "jpeg"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"\x00\x00\x00\x0cjP  \r\n\x87\n", "jpeg2000"),
    (b"\xff\x4f\xff\x51", "jpeg2000"),
    (b"8BPS", "psd"),
)
_ISO_BRANDS = {b"heic": "heic", b"heix": "heic", b"mif1": "heif", b"avif": "avif"}
SUPPORTED = frozenset({"jpeg", "png", "gif", "bmp", "tiff", "webp"})
# What Pillow's plugins raise on malformed data (OSError "truncated", SyntaxError "not a PNG",
# struct.error and IndexError from short headers, EOFError from frame seeking, ...).
DECODER_ERRORS = (
    OSError,
    SyntaxError,
    ValueError,
    struct.error,
    IndexError,
    EOFError,
    TypeError,
    ZeroDivisionError,
)


class ImageConfig(NamedTuple):
    validate: str = "structural"
    channels: int = 3
    jpeg_quality: int = DEFAULT_JPEG_QUALITY
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_scans: int = DEFAULT_MAX_SCANS
    max_decode_bytes: int = DEFAULT_MAX_DECODE_BYTES
    max_side: int | None = None
    resize_short_side: int | None = None
    resample: str = "bicubic"
    exif_transpose: bool = False
    background: tuple[int, int, int] = (255, 255, 255)
    encoding: str = "jpeg"


class StoredImage(NamedTuple):
    """The bytes that go into the record, described truthfully, and what they were made from:
    the file's own pixel grid and how it was turned (object boxes follow it:
    transforms/image/detection.py)."""

    data: bytes
    format: str  # "JPEG" or "RAW" (uint8, height x width x channels, row-major)
    height: int
    width: int
    channels: int
    source_width: int = 0  # the file's pixel grid, before any rotation or resize
    source_height: int = 0
    orientation: int = 1  # the file's EXIF orientation (1: none, or not one of the 8)
    applied: int = 1  # the orientation the stored pixels were turned by: `orientation` or 1


def sniff(data: bytes) -> str | None:
    """The container format from the leading bytes, or None."""
    for signature, name in _SIGNATURES:
        if data.startswith(signature):
            return name
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[4:8] == b"ftyp":
        return _ISO_BRANDS.get(data[8:12], "iso-media")
    return None


def scale_for(width: int, height: int, config: ImageConfig) -> float:
    """The downscale factor the resize options ask for; 1.0 means keep (never upscale)."""
    scale = 1.0
    if config.resize_short_side:
        scale = min(scale, config.resize_short_side / min(width, height))
    if config.max_side:
        scale = min(scale, config.max_side / max(width, height))
    return scale


def scaled_size(width: int, height: int, scale: float) -> tuple[int, int]:
    """A `width` x `height` image's size once downscaled by `scale` (at most 1), at least 1x1."""
    return max(1, round(width * scale)), max(1, round(height * scale))


def is_upright(orientation: int | None) -> bool:
    """An EXIF orientation that needs no rotation or flip (absent, or 1)."""
    return orientation in (None, 1)


def check_pixels(width: int, height: int, config: ImageConfig) -> None:
    if width * height > config.max_pixels:
        raise RowError(
            Reason.IMAGE_TOO_LARGE,
            f"{width}x{height} is over the limit of {config.max_pixels:,} pixels",
        )


def check_decode_bytes(width: int, height: int, needed: int, config: ImageConfig) -> None:
    """Refuse, before decoding, an image whose decode would hold more memory than allowed."""
    if needed > config.max_decode_bytes:
        raise RowError(
            Reason.IMAGE_TOO_LARGE,
            f"{width}x{height} needs {needed / 2**20:,.0f} MB to decode, over the limit of "
            f"{config.max_decode_bytes / 2**20:,.0f} MB",
        )


def check_jpeg(data: bytes, config: ImageConfig) -> JpegInfo:
    """The checks every JPEG gets, stored as it is or not: its structure, pixels and scans."""
    info = parse_jpeg(data)
    check_pixels(info.width, info.height, config)
    if len(info.scans) > config.max_scans:
        raise RowError(
            Reason.TOO_MANY_SCANS,
            f"{len(info.scans):,} scans, over the limit of {config.max_scans:,}",
        )
    return info


def _keeps_bytes(info: JpegInfo, config: ImageConfig) -> bool:
    """Whether a structurally valid JPEG can be stored exactly as it is."""
    return (
        config.encoding == "jpeg"
        and info.sof in HUFFMAN_8BIT
        and info.precision == 8
        and info.components == config.channels
        and info.adobe_transform != 2
        and scale_for(info.width, info.height, config) >= 1
        and not (config.exif_transpose and not is_upright(info.orientation))
    )


def decodes_every_image(config: ImageConfig) -> bool:
    """Whether these options make every image decode (most JPEGs otherwise pass through)."""
    return (
        config.validate == "full"
        or config.encoding == "raw"
        or config.resize_short_side is not None
        or config.max_side is not None
    )


def pixels():
    """The Pillow side (`pixels.py`), imported by the first image that is decoded: stored as
    they are, JPEGs need no Pillow at all."""
    from transforms.image import pixels

    return pixels


def fastpath():
    """libjpeg-turbo and libvips (`fastpath.py`), imported by the first JPEG decoded."""
    from transforms.image import fastpath

    return fastpath


def _convert_jpeg(data: bytes, info: JpegInfo, config: ImageConfig) -> StoredImage:
    """The fast path where it covers the file and libjpeg decodes it cleanly, else Pillow."""
    held = coefficient_bytes(info)
    if fastpath().covers(info, config):
        stored = fastpath().convert_jpeg(data, info, config, held)
        if stored is not None:  # upright: boxes on the file's grid need only its size
            return stored._replace(source_width=info.width, source_height=info.height)
    return pixels().convert_pixels(data, config, held)


def normalise(data: bytes, config: ImageConfig) -> StoredImage:
    """The bytes to store for one source image; raises RowError with the reason it cannot be."""
    if not data:
        raise RowError(Reason.EMPTY_FILE, "the file is empty")
    kind = sniff(data)
    if kind is None:
        raise RowError(Reason.NOT_AN_IMAGE, f"{len(data):,} bytes with no image signature")
    if kind not in SUPPORTED:
        raise RowError(Reason.UNSUPPORTED_FORMAT, f"{kind} images are not supported")
    if kind != "jpeg":
        return pixels().convert_pixels(data, config)
    info = check_jpeg(data, config)
    if info.sof not in DECODABLE or info.precision != 8:
        raise RowError(
            Reason.UNSUPPORTED_FORMAT,
            f"JPEG frame type 0x{info.sof:02X} with {info.precision}-bit samples",
        )
    if not _keeps_bytes(info, config):
        return _convert_jpeg(data, info, config)
    if config.validate == "full":
        luma = -(-info.width // 8) * -(-info.height // 8)
        check_decode_bytes(info.width, info.height, coefficient_bytes(info) + luma, config)
        pixels().check_jpeg_decodes(data, info)
    orientation = info.orientation or 1
    return StoredImage(
        data, "JPEG", info.height, info.width, info.components, info.width, info.height, orientation
    )
