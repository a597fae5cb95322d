"""JPEG structure without decoding: frame size, colour layout, EXIF orientation, completeness.

Walking the marker segments up to EOI catches the truncated and malformed files that make
`tf.io.decode_jpeg` fail in the middle of a training run. Entropy-coded data and fill bytes are
skipped with a C-speed regex, so the walk costs microseconds, not a decode; the markers outside
the scans are counted and limited, so a file of millions of empty segments cannot stall it.
Whether each scan's data fills its frame only a decode can tell (`scans.check_scans`).

The walk also weighs the entropy-coded data against the frame it claims to fill. In Huffman
coding every 8x8 block of every component has its DC coefficient coded in at least one bit (a
sequential scan spends at least two: the DC code and an end-of-block code; a progressive DC scan
one), so a file with fewer bits of scan data than blocks cannot hold its frame: libjpeg would warn,
fill the rest with grey and decode a 13000x13000 frame from a 64x64 image's bytes. The smallest
real files stay above the bound: a flat grey image spends exactly one bit a block in each
progressive DC scan and two in a sequential scan. Arithmetic coding can spend less than a bit a
block and is not bounded.
"""

import re
import struct
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import Reason, RowError

_FILL = re.compile(rb"\xff+")  # fill bytes: any number of 0xFF before a marker's own
# Bytes of markers outside the scans (0xFF, fill bytes, marker codes): real files hold a few
# hundred (ICC chunks, a progressive file's scans and tables); the walk, in Python, takes a
# microsecond or so each, so millions of empty segments would stall a row for many seconds.
MAX_MARKER_BYTES = 65_536
# Any marker other than a stuffed zero or a restart marker ends an entropy-coded segment.
_NEXT_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7]")
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # minus DHT, JPG, DAC
_STANDALONE = frozenset(range(0xD0, 0xD8)) | {0x01}
_METADATA = frozenset(range(0xE0, 0xF0)) | {0xFE}  # APP0-APP15, COM
HUFFMAN_8BIT = frozenset({0xC0, 0xC1, 0xC2})  # baseline, extended, progressive
DECODABLE = HUFFMAN_8BIT | {0xC9, 0xCA}  # plus arithmetic coding (libjpeg-turbo reads it)
_PROGRESSIVE = frozenset({0xC2, 0xC6, 0xCA, 0xCE})
_ORIENTATION_TAG = 0x0112
# A component's sampling factors: one byte, horizontal:vertical nibbles, each 1-4 for libjpeg.
_SAMPLING = bytes(h << 4 | v for h in range(1, 5) for v in range(1, 5))
_ACROSS, _DOWN = bytes(f >> 4 for f in range(256)), bytes(f & 15 for f in range(256))


class JpegInfo(NamedTuple):
    sof: int  # the frame marker: 0xC0 baseline, 0xC2 progressive, ...
    precision: int
    height: int
    width: int
    components: int
    sampling: bytes = b""  # each component's sampling factors (horizontal:vertical nibbles)
    scans: tuple[tuple[int, int], ...] = ()  # each scan's entropy-coded data: (start, end)
    adobe_transform: int | None = None  # APP14 colour transform: 0 RGB/CMYK, 1 YCbCr, 2 YCCK
    orientation: int | None = None  # EXIF orientation 1-8, when present; 0: only Pillow reads it
    metadata: int = 0  # bytes no decoder reads for the pixels: APPn and COM segments, after EOI


def _truncated() -> RowError:
    return RowError(Reason.CORRUPT_IMAGE, "truncated JPEG: data ends before the EOI marker")


def _too_many_markers() -> RowError:
    return RowError(
        Reason.TOO_MANY_MARKERS,
        f"over {MAX_MARKER_BYTES:,} bytes of markers and fill bytes outside the scans",
    )


def _corrupt(what: str) -> RowError:
    return RowError(Reason.CORRUPT_IMAGE, f"corrupt JPEG: {what}")


def exif_orientation(segment: bytes) -> int | None:
    """The orientation tag of an APP1 Exif segment, or None if it has none that is one of the 8.

    0 when the segment is too irregular to read here (no TIFF header, an IFD that runs past the
    segment, the tag twice, or not one SHORT): Pillow's reader, which turns the pixels of every
    file decoded on its path, also reads the tag as LONG or signed and takes the last of two,
    so only Pillow can tell whether such a file needs turning.
    """
    tiff = segment[6:]
    order = {b"II*\x00": "<", b"MM\x00*": ">"}.get(tiff[:4])
    if order is None:
        return 0
    found = []
    try:
        (ifd,) = struct.unpack_from(order + "I", tiff, 4)
        (entries,) = struct.unpack_from(order + "H", tiff, ifd)
        for index in range(entries):
            tag, kind, count, value = struct.unpack_from(
                order + "HHIH2x", tiff, ifd + 2 + 12 * index
            )
            if tag == _ORIENTATION_TAG:
                found.append((kind, count, value))
    except struct.error:
        return 0
    if not found:
        return None
    if len(found) > 1 or found[0][:2] != (3, 1):
        return 0
    return found[0][2] if 1 <= found[0][2] <= 8 else None


def _frame(marker: int, segment: bytes) -> JpegInfo:
    if len(segment) < 6:
        raise _corrupt("short frame header")
    precision, height, width, components = struct.unpack_from(">BHHB", segment)
    if height == 0 or width == 0 or components not in (1, 3, 4):
        raise _corrupt(f"frame {width}x{height}x{components}")
    sampling = segment[7 : 7 + 3 * components : 3]
    if len(sampling) < components or sampling.translate(None, _SAMPLING):
        raise _corrupt("bad component sampling factors")
    return JpegInfo(marker, precision, height, width, components, sampling)


def blocks(info: JpegInfo) -> int:
    """8x8 blocks of all components: each is its share of the frame by sampling factor, in whole
    blocks, as libjpeg sizes it."""
    wide, high = 8 * max(info.sampling.translate(_ACROSS)), 8 * max(info.sampling.translate(_DOWN))
    return sum(
        -(-info.width * (f >> 4) // wide) * -(-info.height * (f & 15) // high)
        for f in info.sampling
    )


def coefficient_bytes(info: JpegInfo) -> int:
    """What libjpeg holds while decoding: a progressive or multi-scan JPEG keeps every DCT
    coefficient of the image (64 a block, 2 bytes each); one scan is decoded a row at a time."""
    return 128 * blocks(info) if info.sof in _PROGRESSIVE or len(info.scans) > 1 else 0


_MARKER = re.compile(rb"\xff[^\x00]")  # any marker but a stuffed zero, restarts included
_RESTART = re.compile(rb"\xff[\xd0-\xd7]")  # RST0-RST7
_RESTART_CODES = range(0xD0, 0xD8)
_WINDOW = 1 << 16  # bytes of scan data whose restart markers are listed at once: 1.3 MB at most


def _restarts(data: bytes, start: int, stop: int, most: int) -> int:
    """The restart markers from `start` to `stop`, counted until there are more than `most`.

    The regular expression finds each 0xFF by a fast search and looks at the byte after it
    (a bytes.count pass for each of the eight restart codes is many times slower); it lists
    the markers of `_WINDOW` bytes at a time, so a flood of them holds a few MB, not a list
    of the whole flood (7 GB for 250 MB of them), and stops once the count is over. A window
    ends after a whole marker: its second byte is never 0xFF, so none spans two windows."""
    count = 0
    while start < stop and count <= most:
        cut = min(start + _WINDOW, stop)
        cut += cut < stop and data[cut - 1] == 0xFF
        count += len(_RESTART.findall(data, start, cut))
        start = cut
    return count


def _scan_end(data: bytes, start: int, frame: JpegInfo) -> int:
    """Where the entropy-coded data from `start` ends: at the first marker other than a restart.

    One pass at C speed finds the first marker of any kind, which ends the scans of most
    files. A scan that meets a restart marker first is searched on for its end, and its
    restart markers are counted (a scan holds at most one an MCU, and an MCU one block or
    more; libjpeg skips strays) by `_restarts`."""
    found = _MARKER.search(data, start)
    if found is None:
        raise _truncated()
    end = found.start()
    if data[end + 1] not in _RESTART_CODES:
        return end
    found = _NEXT_MARKER.search(data, end)
    if found is None:
        raise _truncated()
    stop, most = found.start(), blocks(frame)
    if _restarts(data, end, stop, most) > most:
        raise RowError(Reason.TOO_MANY_MARKERS, "more restart markers than blocks")
    return stop


def _check_coded(frame: JpegInfo, coded: int) -> None:
    """At least a bit of Huffman-coded scan data for each block of the frame."""
    most = frame.components * -(-frame.width // 8) * -(-frame.height // 8)  # no component has more
    if frame.sof not in HUFFMAN_8BIT or coded * 8 >= most:
        return
    needed = blocks(frame)
    if coded * 8 < needed:
        raise _corrupt(
            f"{coded:,} bytes of scan data cannot hold a {frame.width}x{frame.height} frame "
            f"(at least {-(-needed // 8):,})"
        )


def parse_jpeg(data: bytes) -> JpegInfo:
    """Walk every marker segment up to EOI; raises RowError if the structure is broken. Only
    the frame header and an Exif segment are copied out: every JPEG of every run passes here."""
    pos, end, frame, scans, coded, marker_bytes = 2, len(data), None, [], 0, 2
    metadata, adobe_transform, orientation = 0, None, -1  # -1: no Exif segment seen
    while True:
        if pos >= end:
            raise _truncated()
        if data[pos] != 0xFF:
            raise _corrupt(f"no marker at byte {pos}")
        start, pos = pos, pos + 1
        if pos < end and data[pos] == 0xFF:  # fill bytes: rare, skipped at C speed
            pos = _FILL.match(data, pos).end()
        marker_bytes += pos - start + 1
        if marker_bytes > MAX_MARKER_BYTES:
            raise _too_many_markers()
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
        length = data[pos] << 8 | data[pos + 1]
        if length < 2:
            raise _corrupt(f"segment length {length}")
        if pos + length > end:
            raise _truncated()
        if marker in _METADATA:
            metadata += length
            if marker == 0xEE and length >= 14 and data.startswith(b"Adobe", pos + 2):
                adobe_transform = data[pos + 13]
            elif (
                marker == 0xE1
                and orientation == -1  # the first Exif segment's, when there are several
                and data.startswith(b"Exif\x00\x00", pos + 2, pos + length)
            ):
                orientation = exif_orientation(data[pos + 2 : pos + length])
        elif marker in _SOF_MARKERS and frame is None:
            frame = _frame(marker, data[pos + 2 : pos + length])
        pos += length
        if marker == 0xDA:
            if frame is None:
                raise _corrupt("scan before frame header")
            end_of_scan = _scan_end(data, pos, frame)
            scans.append((pos, end_of_scan))
            coded += end_of_scan - pos
            pos = end_of_scan
    if frame is None:
        raise _corrupt("no frame header")
    if not scans:
        raise _corrupt("no scan")
    _check_coded(frame, coded)
    exif = None if orientation == -1 else orientation
    header = frame[: JpegInfo._fields.index("scans")]  # sof to sampling: what `_frame` read
    return JpegInfo(*header, tuple(scans), adobe_transform, exif, metadata + end - pos)
