"""The image options (`ImageConfig`), the stored image (`StoredImage`), and what both image
paths, libjpeg-turbo's (`fastpath.py`) and Pillow's (`pixels.py`), measure against them: the
size a resize asks for, and the pixel and memory limits checked before anything is decoded.

Apart from `images.py`, which decides the path and imports each one only when it is taken, so
that neither imports the other or the module that chooses between them.
"""

import struct
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import Reason, RowError

DEFAULT_MAX_PIXELS = 178_956_970  # Pillow's own decompression-bomb error threshold
# Every scan is a pass over its blocks, and a crafted JPEG can hold thousands of near-empty
# ones. Real encoders write 1-4 scans sequential, 10 progressive (libjpeg; 6 for grayscale);
# mozjpeg picks its scans from a script of 64.
DEFAULT_MAX_SCANS = 100
# Memory one image may hold while it is decoded and converted (see pixels.peak_bytes): a
# 50-megapixel RGB photo needs a quarter of it, a 13000x13000 RGBA PNG nearly twice as much.
DEFAULT_MAX_DECODE_BYTES = 1 << 30
# Pixels a JPEG's frame claims for each byte of its scans' data. Huffman coding spends at least a
# bit a block (parse_jpeg: 512 pixels a byte at most), arithmetic coding can spend almost none:
# 106 bytes claiming 13000x13000 decoded into 850 MB. Arithmetic-coded photos reach 10-20 at
# usual qualities, 30-170 at quality 10, 95-590 at quality 1; only a flat frame goes beyond.
DEFAULT_MAX_PIXELS_PER_BYTE = 1024
# Bytes of a JPEG that are not its image (APPn and COM segments, bytes after EOI), stored with it
# when it passes through: EXIF is 64 KB at most, an ICC profile a few KB (a print profile 1-3
# MB), a phone's depth map, motion photo video or original image a few MB.
DEFAULT_MAX_METADATA_BYTES = 16 << 20
DEFAULT_JPEG_QUALITY = 95
# How much of a JPEG is checked before it is stored (docs/images.md#validation-levels): its
# marker walk and the bound of its frame by its scan data; also a strict decode of every scan at
# 1/8 scale; or a strict decode at full size, as `tf.io.decode_jpeg` makes at training.
VALIDATE_LEVELS = ("markers", "scans", "pixels")
# Older names: both made the `scans` check (since 0.1, `full` had decoded no more than it).
VALIDATE_SPELLINGS = {"structural": "scans", "full": "scans"}
ENCODINGS = ("jpeg", "raw")
RESAMPLE_FILTERS = ("nearest", "box", "bilinear", "hamming", "bicubic", "lanczos")  # Pillow's
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
    validate: str = "scans"  # one of VALIDATE_LEVELS
    channels: int = 3
    jpeg_quality: int = DEFAULT_JPEG_QUALITY
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_scans: int = DEFAULT_MAX_SCANS
    max_decode_bytes: int = DEFAULT_MAX_DECODE_BYTES
    max_pixels_per_byte: int = DEFAULT_MAX_PIXELS_PER_BYTE
    max_metadata_bytes: int = DEFAULT_MAX_METADATA_BYTES
    max_side: int | None = None
    resize_short_side: int | None = None
    resample: str = "bicubic"
    exif_transpose: bool = False
    background: tuple[int, int, int] = (255, 255, 255)
    encoding: str = "jpeg"


class StoredImage(NamedTuple):
    """The bytes that go into the record, described truthfully, and what they were made from:
    the file's own pixel grid and how it was turned (object boxes follow it:
    transforms/image/placement.py)."""

    data: bytes
    format: str  # "JPEG" or "RAW" (uint8, height x width x channels, row-major)
    height: int
    width: int
    channels: int
    source_width: int = 0  # the file's pixel grid, before any rotation or resize
    source_height: int = 0
    orientation: int = 1  # the file's EXIF orientation (1: none, or not one of the 8)
    applied: int = 1  # the orientation the stored pixels were turned by: `orientation` or 1


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
