"""Image bytes in, bytes fit for `tf.io.decode_jpeg` (or raw pixels) out, decided by content.

A valid 8-bit Huffman-coded JPEG with the wanted channel count, small enough and (with
`exif_transpose`) upright, is stored byte-identical after a structural check (`jpeg.py`) and the
decode `--validate` asks (`check_scans`): by default a strict libjpeg decode of its luma at 1/8
scale (libjpeg still reads every coefficient of every component, so a scan that runs short is
found at a fraction of a full decode's cost), none at `markers`, a full-size one at `pixels`.
Every other JPEG is decoded anyway, strictly, at every level: the fast path's decode is its
check; one Pillow decodes is checked first. Everything
else Pillow reads (PNG 8/16-bit, palette, alpha; GIF's first frame; BMP; TIFF; WebP; CMYK, YCCK
or Adobe RGB JPEG) is decoded, EXIF-rotated, flattened onto the background if it has alpha,
resized if asked, and stored as JPEG or raw pixels, by `pixels.py` (Pillow), which is imported
only when an image is decoded. Both decode paths take their options and limits from
`config.py`; this module alone chooses between them.
"""

import functools

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image.config import (
    ImageConfig,
    StoredImage,
    check_decode_bytes,
    check_pixels,
    scale_for,
)
from tfrecord_pipeline.transforms.image.jpeg import (
    DECODABLE,
    HUFFMAN_8BIT,
    JpegInfo,
    coefficient_bytes,
    parse_jpeg,
)
from tfrecord_pipeline.transforms.image.orientation import is_upright

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


def check_jpeg(data: bytes, config: ImageConfig) -> JpegInfo:
    """The checks every JPEG gets, stored as it is or not: its structure, pixels, scans and
    metadata, all from the marker walk, before anything is decoded."""
    info = parse_jpeg(data)
    check_pixels(info.width, info.height, config)
    if len(info.scans) > config.max_scans:
        raise RowError(
            Reason.TOO_MANY_SCANS,
            f"{len(info.scans):,} scans, over the limit of {config.max_scans:,}",
        )
    coded = sum(end - start for start, end in info.scans)
    if info.width * info.height > config.max_pixels_per_byte * coded:
        raise RowError(
            Reason.TOO_COMPRESSED,
            f"{info.width}x{info.height} from {coded:,} bytes of scan data, over the limit of "
            f"{config.max_pixels_per_byte:,} pixels a byte",
        )
    if info.metadata > config.max_metadata_bytes:
        raise RowError(
            Reason.TOO_MUCH_METADATA,
            f"{info.metadata / 2**20:,.1f} MB of APPn and COM segments and bytes after EOI, "
            f"over the limit of {config.max_metadata_bytes / 2**20:,.1f} MB",
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
        config.validate == "pixels"
        or config.encoding == "raw"
        or config.resize_short_side is not None
        or config.max_side is not None
    )


def preload(config: ImageConfig) -> None:
    """Import now what converting images under `config` takes (before a process forks its
    shard writers, which then share it): libjpeg checks every JPEG's scans; libvips and Pillow
    only where images are decoded."""
    scans()
    if decodes_every_image(config):
        fastpath(), pixels()


@functools.cache
def pixels():
    """The Pillow side (`pixels.py`), imported by the first image that is decoded: stored as
    they are, JPEGs need no Pillow at all."""
    from tfrecord_pipeline.transforms.image import pixels

    return pixels


@functools.cache
def fastpath():
    """libjpeg-turbo and libvips (`fastpath.py`), imported by the first JPEG converted: stored
    as they are, JPEGs need no libvips."""
    from tfrecord_pipeline.transforms.image import fastpath

    return fastpath


@functools.cache
def scans():
    """libjpeg-turbo's strict decode (`scans.py`), imported by the first JPEG checked."""
    from tfrecord_pipeline.transforms.image import scans

    return scans


def check_scans(data: bytes, info: JpegInfo, config: ImageConfig) -> None:
    """The decode `config.validate` asks of a JPEG, within the memory limit: none at `markers`
    (its marker walk, `check_jpeg`, is all); at `scans`, that libjpeg decodes every scan without
    a warning (its data fills the frame), making a progressive JPEG's coefficients and the luma
    at 1/8; at `pixels`, every component at full size, as training will decode it."""
    if config.validate == "markers":
        return
    full = config.validate == "pixels"
    step, planes = (1, info.components) if full else (8, 4 if info.components == 4 else 1)
    made = -(-info.width // step) * -(-info.height // step) * planes
    check_decode_bytes(info.width, info.height, coefficient_bytes(info) + made, config)
    scans().check_scans(data, info, full)


def _convert_jpeg(data: bytes, info: JpegInfo, config: ImageConfig) -> StoredImage:
    """The fast path where it covers the file, its strict decode the check, the one decode it
    gets (`--validate pixels` asks the full-size one first where the fast path decodes smaller
    or in other colours); else Pillow, whose decoder does not report libjpeg's warnings, after
    the check at every level: a JPEG decoded anyway is decoded strictly."""
    held = coefficient_bytes(info)
    if fastpath().covers(info, config):
        if config.validate == "pixels" and not fastpath().decodes_whole(info, config):
            check_scans(data, info, config)
        stored = fastpath().convert_jpeg(data, info, config, held)
        if stored is not None:  # boxes on the file's grid need only its size
            return stored._replace(source_width=info.width, source_height=info.height)
    else:
        strict = "scans" if config.validate == "markers" else config.validate
        check_scans(data, info, config._replace(validate=strict))
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
    check_scans(data, info, config)
    orientation = info.orientation or 1
    return StoredImage(
        data, "JPEG", info.height, info.width, info.components, info.width, info.height, orientation
    )
