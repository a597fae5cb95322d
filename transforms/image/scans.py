"""libjpeg-turbo's strict decode, through `simplejpeg`: the check that a JPEG's scans decode
cleanly, and the decode of the fast path (fastpath.py), which is its check.

libjpeg in strict mode stops at the first warning: a scan whose data ends before its frame is
filled ("premature end of data segment", however the file goes on: an EOI, zeros, garbage), a
bad Huffman code, a restart marker out of place, bytes after a scan. Its own module, apart from
the fast path's libvips, which a conversion that stores its JPEGs as they are never loads.
"""

import numpy as np
import simplejpeg

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image.jpeg import JpegInfo


def decode_strictly(data: bytes, colorspace: str, height: int, width: int) -> np.ndarray:
    """libjpeg's decode at the smallest DCT scale that covers `width` x `height`; RowError at
    its first warning or error, in libjpeg's words."""
    try:
        return simplejpeg.decode_jpeg(
            data, colorspace, min_height=height, min_width=width, strict=True
        )
    except ValueError as error:
        raise RowError(Reason.CORRUPT_IMAGE, f"JPEG does not decode cleanly: {error}") from None


def check_scans(data: bytes, info: JpegInfo, full: bool = False) -> None:
    """Every scan decodes without a warning, so its data fills the frame: luma (CMYK for four
    components, which libjpeg does not turn into grey) at 1/8 scale; `full`: every component
    at full size, in the file's colours, as `tf.io.decode_jpeg` decodes it."""
    step = 1 if full else 8
    colorspace = (
        "CMYK" if info.components == 4 else "RGB" if full and info.components == 3 else "GRAY"
    )
    decode_strictly(data, colorspace, -(-info.height // step), -(-info.width // step))
