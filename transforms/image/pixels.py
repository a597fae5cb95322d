"""Decoding, converting and encoding with Pillow: every image that is not stored as it is.

Kept apart from `images.py` so that a pass-through conversion, whose JPEGs are checked by
walking their markers and stored byte-identical, never pays for loading Pillow.
"""

import io
import math
import warnings

from PIL import Image

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image.config import (
    DECODER_ERRORS,
    ImageConfig,
    StoredImage,
    check_decode_bytes,
    check_pixels,
    scale_for,
    scaled_size,
)
from tfrecord_pipeline.transforms.image.orientation import ORIENTATIONS

_WIDE_INTEGER = ("I;16", "I;16B", "I;16L", "I")  # scaled to 8 bits through a 32-bit copy
# How exif_transpose turns an image for each EXIF orientation (1: not at all).
_TURNS = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}


def _open(data: bytes, config: ImageConfig) -> Image.Image:
    """Open with our own pixel limit checked before any pixel is decoded."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data))
        except Image.DecompressionBombError as error:
            raise RowError(Reason.IMAGE_TOO_LARGE, str(error)) from None
        except Image.UnidentifiedImageError:  # its text holds the buffer's memory address
            raise RowError(Reason.CORRUPT_IMAGE, "no image decoder accepts the data") from None
        except DECODER_ERRORS as error:
            raise RowError(Reason.CORRUPT_IMAGE, f"cannot open image: {error}") from None
    check_pixels(image.width, image.height, config)
    return image


def _load(image: Image.Image) -> None:
    try:
        image.load()
    except DECODER_ERRORS as error:
        raise RowError(Reason.CORRUPT_IMAGE, f"cannot decode image: {error}") from None


def _bytes_per_pixel(mode: str) -> int:
    """How Pillow stores a pixel: a byte for 1, L and P, two for 16-bit, else four (RGB too)."""
    return 1 if mode in ("1", "L", "P") else 2 if mode.startswith("I;16") else 4


def _has_alpha(image: Image.Image) -> bool:
    return image.mode == "P" or image.mode.endswith(("A", "a")) or "transparency" in image.info


def peak_bytes(image: Image.Image, config: ImageConfig, rotated: bool = False) -> int:
    """The most pixel memory `convert_pixels` holds at once for an opened image, from its mode
    and size alone.

    Counted: the decoded image, with its rotated copy or the copies `_to_mode` makes (16-bit:
    a 32-bit copy and its scaled copy; alpha: an RGBA copy unless it is one, the background and
    the composite; else the converted image); then the converted image with what a resize
    makes (its horizontal pass, then the result) or with the encoded bytes (raw: the channels,
    twice as `tobytes` joins its pieces; JPEG: a byte a pixel, more than photos take).
    """
    pixels = image.width * image.height
    decoded = pixels * _bytes_per_pixel(image.mode)
    converted = pixels * (1 if config.channels == 1 else 4)
    copies = 8 * pixels if image.mode in _WIDE_INTEGER else 0
    if _has_alpha(image):
        copies += (8 if image.mode == "RGBA" else 12) * pixels
    elif image.mode != ("L" if config.channels == 1 else "RGB"):
        copies = max(copies, converted)
    scale = scale_for(image.width, image.height, config)
    if scale < 1:
        after = int(converted * (scale + scale * scale))
    else:
        after = pixels * (2 * config.channels if config.encoding == "raw" else 1)
    return max(decoded + max(decoded if rotated else 0, copies), converted + after)


def _to_mode(image: Image.Image, config: ImageConfig) -> Image.Image:
    """8-bit L or RGB; alpha composited onto the background, 16-bit scaled rather than clipped."""
    if image.mode in _WIDE_INTEGER:
        image = image.convert("I").point(lambda value: value * (1 / 256)).convert("L")
    if _has_alpha(image):
        rgba = image if image.mode == "RGBA" else image.convert("RGBA")
        image = Image.alpha_composite(Image.new("RGBA", rgba.size, (*config.background, 255)), rgba)
    mode = "L" if config.channels == 1 else "RGB"
    return image if image.mode == mode else image.convert(mode)  # convert() copies when equal


def _encode(
    image: Image.Image, config: ImageConfig, source: tuple[int, int], orientation: int
) -> StoredImage:
    """The stored image, and the file's grid (`source`) and `orientation` it was turned by."""
    if config.encoding == "raw":
        data, fmt = image.tobytes(), "RAW"
    else:
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=config.jpeg_quality)
        data, fmt = buffer.getvalue(), "JPEG"
    return StoredImage(
        data, fmt, image.height, image.width, config.channels, *source, orientation, orientation
    )


def _turned_by(orientation: object) -> int:
    """The orientation an image is turned by: the tag, when it is one of the 8, else 1."""
    return orientation if orientation in ORIENTATIONS else 1


def convert_pixels(data: bytes, config: ImageConfig, held: int = 0) -> StoredImage:
    """Decode (at reduced size where the resize allows), convert, resize, orient, encode.

    `held`: what the decoder itself keeps while decoding (a progressive JPEG's coefficients).
    Memory is checked before decoding, and again before rotating (EXIF is read after decoding).
    The image is resized on the file's grid, then turned: a reduced-size decode's last column
    and row may stand for part of a pixel (a 257-pixel side decoded at 1/8 is 33 pixels, the
    last one source pixel wide), and the resize measures on the file's `extent` on that grid,
    so the part-pixel does not stretch the image; turned first, that edge would move.
    """
    image = _open(data, config)
    width, height = image.size
    scale = scale_for(width, height, config)
    extent = None
    if scale < 1:  # JPEG: libjpeg decodes at 1/2, 1/4 or 1/8 size, never below the request
        drafted = image.draft(image.mode, (math.ceil(width * scale), math.ceil(height * scale)))
        extent = drafted[1] if drafted else None
    check_decode_bytes(width, height, held + peak_bytes(image, config), config)
    _load(image)
    try:
        # Read EXIF only after the guarded load: for PNG, getexif() itself decodes the image.
        orientation = image.getexif().get(0x0112)
        turn = _turned_by(orientation)
        image = _to_mode(image, config)
        on_grid = scaled_size(width, height, min(scale, 1.0))
        if image.size != on_grid:
            image = image.resize(on_grid, Image.Resampling[config.resample.upper()], box=extent)
        if turn != 1:
            check_decode_bytes(width, height, peak_bytes(image, config, rotated=True), config)
            image = image.transpose(_TURNS[turn])
        return _encode(image, config, (width, height), turn)
    except DECODER_ERRORS as error:
        raise RowError(Reason.UNSUPPORTED_FORMAT, f"cannot convert image: {error}") from None


def mask_png(column_major: bytes, grid: tuple[int, int], turn: int, size: tuple[int, int]) -> bytes:
    """A mask (a byte a pixel of the `grid`, column by column) as an 8-bit grayscale PNG of
    `size`, turned by the EXIF orientation `turn` as exif_transpose turns pixels, then
    resized with NEAREST (its pixels stay 0 or 1, none made between). 0 and 1, not 0 and
    255: Google's converter writes pycocotools' masks so, and the Model Garden's decoder
    reads the PNG's values as the mask's (1.0 inside)."""
    width, height = grid
    image = Image.frombytes("L", (height, width), column_major)  # the mask, transposed
    image = image.transpose(Image.Transpose.TRANSPOSE)
    if turn in _TURNS:
        image = image.transpose(_TURNS[turn])
    if image.size != size:
        image = image.resize(size, Image.Resampling.NEAREST)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()
