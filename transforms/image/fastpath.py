"""The fast path for 8-bit RGB and grayscale JPEGs, decoded and encoded by libjpeg-turbo
(`simplejpeg`), resized by libvips' `reduce` (SIMD code) and turned by NumPy; Pillow does
everything else.

Every JPEG (but one stored as it is under `--validate markers`) is decoded by libjpeg in strict
mode (scans.py), which stops at the first warning. Pillow ignores those warnings and fills the
missing blocks with grey, as `tf.io.decode_jpeg` does; such a file is an error row. A JPEG
stored as it is gets the check alone (`scans.check_scans`: luma at 1/8 scale, where nearly
all the cost is Huffman decoding, which no decoder skips; at full size in its own colours
under `--validate pixels`); one the fast path converts is checked by its own decode,
the one decode it gets (under `pixels`, the full-size one first where its own is smaller or in
other colours: `decodes_whole`). Covered by the fast path: one or three components (YCbCr,
not Adobe RGB or YCCK), an EXIF orientation the marker walk reads (`jpeg.exif_orientation`),
and a resize, when one is asked, with a filter libvips has too: bilinear, bicubic
(Catmull-Rom, as Pillow's) and lanczos (Lanczos-3), each widened by the downscale factor as
Pillow widens them, so they antialias alike. A JPEG is decoded at 1/2, 1/4 or 1/8 scale where
the target allows (libjpeg's DCT scaling with its SIMD inverse DCTs; the other M/8 scales use
C code and decode slower than full size), resampled to the exact size on the file's grid,
then turned upright as Pillow's `exif_transpose` turns it.
"""

import numpy as np
import pyvips
import simplejpeg

from tfrecord_pipeline.transforms.image.config import (
    ImageConfig,
    StoredImage,
    check_decode_bytes,
    scale_for,
    scaled_size,
)
from tfrecord_pipeline.transforms.image.jpeg import HUFFMAN_8BIT, JpegInfo
from tfrecord_pipeline.transforms.image.orientation import turn_steps
from tfrecord_pipeline.transforms.image.scans import decode_strictly

# The converter runs its own threads (one image each): libvips' pool would only contend, and
# its operation cache would keep images the converter has finished with.
pyvips.concurrency_set(1)
pyvips.cache_set_max(0)
# The rows libvips' own sink (`write_to_memory`) asks a pipeline for at a time: its fat-strip
# height. `reduce`'s rows depend on where a request begins, so these strips make its bytes.
STRIP_LINES = 16
VIPS_KERNELS = {"bilinear": "linear", "bicubic": "cubic", "lanczos": "lanczos3"}


def covers(info: JpegInfo, config: ImageConfig) -> bool:
    """Whether this JPEG's conversion can be the fast path's."""
    return (
        info.sof in HUFFMAN_8BIT
        and info.precision == 8
        and (info.components == 1 or (info.components == 3 and info.adobe_transform in (None, 1)))
        and info.orientation != 0  # a tag only Pillow's reader can tell
        and (config.resample in VIPS_KERNELS or scale_for(info.width, info.height, config) >= 1)
    )


def _decode_step(width: int, height: int, size: tuple[int, int]) -> int:
    """The largest of 1, 2, 4, 8 the image can be decoded at (1/step) and still cover `size`."""
    step = 1
    while step < 8 and width // (2 * step) >= size[0] and height // (2 * step) >= size[1]:
        step *= 2
    return step


def _plan(info: JpegInfo, config: ImageConfig) -> tuple[tuple[int, int], int]:
    """The size the conversion makes on the file's grid, and the DCT scale (1/step) it decodes
    at."""
    size = scaled_size(info.width, info.height, min(scale_for(info.width, info.height, config), 1))
    return size, _decode_step(info.width, info.height, size)


def decodes_whole(info: JpegInfo, config: ImageConfig) -> bool:
    """Whether the conversion's decode is the full-size one in the file's own colours that
    `scans.check_scans(full=True)` makes, so that it checks as much."""
    return _plan(info, config)[1] == 1 and config.channels == info.components


def convert_jpeg(data: bytes, info: JpegInfo, config: ImageConfig, held: int) -> StoredImage | None:
    """Decode (DCT-scaled), resample, turn upright, encode; None when libvips cannot reduce
    that far (Pillow's path then decides); RowError when libjpeg warns. `held`: what the
    decoder keeps (a progressive JPEG's coefficients)."""
    size, step = _plan(info, config)
    channels = config.channels
    turn = info.orientation or 1
    decoded_width, decoded_height = -(-info.width // step), -(-info.height // step)
    made = (2 + (turn != 1)) * size[0] * size[1]  # a third image of its size when turned
    needed = held + (decoded_width * decoded_height + made) * channels
    check_decode_bytes(info.width, info.height, needed, config)
    colorspace = "RGB" if channels == 3 else "GRAY"
    pixels = decode_strictly(data, colorspace, decoded_height, decoded_width)
    if pixels.shape[1::-1] != size:
        extent = (info.width / step, info.height / step)
        try:
            pixels = resample(pixels, size, VIPS_KERNELS[config.resample], extent)
        except pyvips.Error:  # "reduce factor too large": a strip shrunk hundreds of times
            return None
    return encode(turned(pixels, turn), config)._replace(orientation=turn, applied=turn)


def turned(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """Height x width x channels pixels turned by an EXIF `orientation`, as Pillow's
    `exif_transpose` turns them (the same moves of whole pixels)."""
    if orientation == 1:
        return pixels
    swap, flip_x, flip_y = turn_steps(orientation)
    height, width, channels = pixels.shape
    whole = pixels.view(f"V{channels}").reshape(height, width)  # a pixel copied as one item
    if swap:
        whole = whole.T
    if flip_x:
        whole = whole[:, ::-1]
    if flip_y:
        whole = whole[::-1]
    return np.ascontiguousarray(whole).view(np.uint8).reshape(*whole.shape, channels)


def encode(pixels: np.ndarray, config: ImageConfig) -> StoredImage:
    """uint8 height x width x channels pixels as the stored image: raw bytes, or a JPEG at
    `jpeg_quality` with 4:2:0 chroma, as Pillow writes it."""
    height, width, channels = pixels.shape
    if config.encoding == "raw":
        return StoredImage(pixels.tobytes(), "RAW", height, width, channels)
    data = simplejpeg.encode_jpeg(
        pixels,
        config.jpeg_quality,
        "RGB" if channels == 3 else "GRAY",
        "420" if channels == 3 else "Gray",
    )
    return StoredImage(data, "JPEG", height, width, channels)


def resample(
    pixels: np.ndarray,
    size: tuple[int, int],
    kernel: str,
    extent: tuple[float, float] | None = None,
) -> np.ndarray:
    """libvips' reduce of uint8 height x width x channels pixels to `size` (width, height).

    `extent` (width, height): how much of the image the pixels hold, when a DCT-scaled decode's
    last column and row stand for part of a pixel (a 257-pixel-wide image decoded at 1/8 is 33
    columns, the last of them one source pixel wide). The shrink is measured on it, as Pillow's
    `resize(box=...)` measures on its box, so that part-pixel does not stretch the image across
    a whole output pixel; a column or row reduce makes beyond `size` is left out.

    The pixels are fetched in this thread, strip by strip, as libvips' sink would fetch them:
    the sink starts libvips' thread pool for every image, about 450 us of a 0.2 MP resize.
    """
    height, width, channels = pixels.shape
    extent = extent or (width, height)
    image = pyvips.Image.new_from_memory(pixels.data, width, height, channels, "uchar")
    region = pyvips.Region.new(
        image.reduce(extent[0] / size[0], extent[1] / size[1], kernel=kernel)
    )
    strips = (
        region.fetch(0, top, size[0], min(STRIP_LINES, size[1] - top))
        for top in range(0, size[1], STRIP_LINES)
    )
    return np.frombuffer(b"".join(strips), np.uint8).reshape(size[1], size[0], channels)
