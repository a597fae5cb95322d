"""transforms/image/jpeg.py, pure: the marker walk's frame, scans and APP segments, the EXIF
orientation it reads (or leaves to Pillow), blocks by sampling factor, and broken structures.
(The data bound and scan count on crafted and real files: test_hostile.py; scans that run
short and a file of millions of empty segments, through a conversion: test_hostile_jpeg.py.)"""

import struct

import pytest
from conftest import encode, photo

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image.jpeg import (
    MAX_MARKER_BYTES,
    blocks,
    exif_orientation,
    parse_jpeg,
)

SMALL = photo().resize((64, 48))
BASELINE = encode(SMALL)


def test_the_walk_reads_the_frame_and_where_each_scan_s_data_lies():
    info = parse_jpeg(BASELINE)
    assert info[:5] == (0xC0, 8, 48, 64, 3)  # baseline, 8-bit, 48 high, 64 wide, 3 components
    assert info.sampling == b"\x22\x11\x11" and info.adobe_transform is info.orientation is None
    ((start, end),) = info.scans
    scan = BASELINE[start:end]
    assert scan.count(b"\xff") == scan.count(b"\xff\x00") and BASELINE[end:] == b"\xff\xd9"
    progressive = parse_jpeg(encode(SMALL, progressive=True))
    assert progressive.sof == 0xC2 and len(progressive.scans) > 1
    assert parse_jpeg(encode(SMALL.convert("CMYK"))).adobe_transform == 0


_RESTARTS = [bytes((0xFF, code)) for code in range(0xD0, 0xD8)]


def _ends_at_a_marker_past_its_restarts(data: bytes, scan: tuple[int, int]) -> bool:
    """Whether a scan's data holds no marker but stuffed zeros and restarts, and ends where
    another marker begins."""
    inside, after = data[scan[0] : scan[1]], data[scan[1] : scan[1] + 2]
    markers = inside.count(b"\xff\x00") + sum(map(inside.count, _RESTARTS))
    return inside.count(b"\xff") == markers and after[0] == 0xFF and after not in _RESTARTS


@pytest.mark.parametrize(
    "params",
    [{"restart_marker_blocks": 1}, {"restart_marker_rows": 1, "progressive": True}],
)
def test_a_scan_runs_on_past_its_restart_markers_to_the_next_other_marker(params):
    data = encode(SMALL, **params)
    info = parse_jpeg(data)
    assert b"\xff\xd0" in data[info.scans[0][0] : info.scans[0][1]]
    assert all(_ends_at_a_marker_past_its_restarts(data, scan) for scan in info.scans)
    assert data[info.scans[-1][1] :] == b"\xff\xd9"


def test_a_scan_may_hold_a_restart_marker_a_block_and_no_more():
    """Restart markers a stray at a time before the EOI: up to one a block (72 of BASELINE's
    4:2:0 64x48 frame) the scan runs on to the EOI; one more is refused."""
    sound = BASELINE[:-2] + b"\xff\xd0" * 72 + b"\xff\xd9"
    assert parse_jpeg(sound).scans[0][1] == len(sound) - 2
    with pytest.raises(RowError) as raised:
        parse_jpeg(BASELINE[:-2] + b"\xff\xd0" * 73 + b"\xff\xd9")
    assert raised.value.reason is Reason.TOO_MANY_MARKERS


def test_blocks_count_each_component_by_its_sampling_factors_in_whole_blocks():
    assert blocks(parse_jpeg(BASELINE)) == 48 + 12 + 12  # 4:2:0: chroma at half each way
    assert blocks(parse_jpeg(encode(SMALL, subsampling=0))) == 3 * 48
    assert blocks(parse_jpeg(encode(SMALL.convert("L").resize((9, 17))))) == 2 * 3


def _exif(*entries: tuple[int, int, int, int], order: bytes = b"II") -> bytes:
    """An APP1 Exif segment's body: one IFD of (tag, type, count, value) entries."""
    sign = "<" if order == b"II" else ">"
    header = order + struct.pack(sign + "HI", 42, 8) + struct.pack(sign + "H", len(entries))
    body = b"".join(struct.pack(sign + "HHIH2x", *entry) for entry in entries)
    return b"Exif\x00\x00" + header + body + bytes(4)


@pytest.mark.parametrize(
    "segment, orientation",
    [
        (_exif((0x0112, 3, 1, 6)), 6),
        (_exif((0x0100, 3, 1, 640), (0x0112, 3, 1, 8), order=b"MM"), 8),
        (_exif((0x0100, 3, 1, 640)), None),  # no orientation tag
        (_exif((0x0112, 3, 1, 9)), None),  # not one of the eight
        (_exif((0x0112, 4, 1, 6)), 0),  # a LONG: Pillow reads it, so only Pillow can tell
        (_exif((0x0112, 3, 1, 1), (0x0112, 3, 1, 6)), 0),  # twice: Pillow takes the last
        (_exif((0x0112, 3, 1, 6))[:20], 0),  # the IFD runs past the segment
        (b"Exif\x00\x00XX*\x00", 0),  # no TIFF header
    ],
)
def test_exif_orientation_is_read_only_when_it_is_unambiguous(segment, orientation):
    assert exif_orientation(segment) == orientation


def test_the_walk_takes_the_first_exif_orientation():
    app1 = [_exif((0x0112, 3, 1, turn)) for turn in (6, 3)]
    segments = b"".join(b"\xff\xe1" + struct.pack(">H", len(s) + 2) + s for s in app1)
    assert parse_jpeg(BASELINE[:2] + segments + BASELINE[2:]).orientation == 6


def _frame_with(data: bytes, offset: int, value: bytes) -> bytes:
    """The JPEG with bytes of its frame header (after the SOF marker) replaced."""
    at = data.index(b"\xff\xc0") + 2 + offset
    return data[:at] + value + data[at + len(value) :]


@pytest.mark.parametrize(
    "data, says",
    [
        (BASELINE[:-2], "truncated JPEG: data ends before the EOI marker"),
        (BASELINE[:-40], "truncated JPEG"),
        (BASELINE[:2] + b"\x00" + BASELINE[2:], "corrupt JPEG: no marker at byte 2"),
        (BASELINE[:2] + b"\xff\xe0\x00\x01" + BASELINE[2:], "corrupt JPEG: segment length 1"),
        (_frame_with(BASELINE, 3, b"\x00\x00"), "corrupt JPEG: frame 64x0x3"),
        (_frame_with(BASELINE, 5, b"\x00\x00"), "corrupt JPEG: frame 0x48x3"),
        (_frame_with(BASELINE, 9, b"\x55"), "corrupt JPEG: bad component sampling factors"),
        (BASELINE.replace(b"\xff\xc0", b"\xff\xe2", 1), "corrupt JPEG: scan before frame header"),
        (b"\xff\xd8\xff\xd9", "corrupt JPEG: no frame header"),
    ],
)
def test_a_broken_structure_is_a_corrupt_image_saying_what_is_broken(data, says):
    with pytest.raises(RowError) as raised:
        parse_jpeg(data)
    assert raised.value.reason is Reason.CORRUPT_IMAGE and raised.value.message.startswith(says)


def _after_soi(data: bytes, inserted: bytes) -> bytes:
    return data[:2] + inserted + data[2:]


@pytest.mark.parametrize(
    "inserted",
    [
        b"\xff\xfe\x00\x02" * (MAX_MARKER_BYTES // 2),  # empty COM segments
        b"\xff\x01" * (MAX_MARKER_BYTES // 2 + 1),  # standalone TEM markers
        b"\xff" * MAX_MARKER_BYTES,  # fill bytes before the next marker
    ],
)
def test_markers_and_fill_bytes_outside_the_scans_are_limited(inserted):
    with pytest.raises(RowError) as raised:
        parse_jpeg(_after_soi(BASELINE, inserted))
    assert raised.value.reason is Reason.TOO_MANY_MARKERS


def test_markers_under_the_limit_pass():
    comments = b"\xff\xfe\x00\x03!" * 2000 + b"\xff" * 1000
    assert parse_jpeg(_after_soi(BASELINE, comments))[:5] == parse_jpeg(BASELINE)[:5]


def test_the_walk_counts_the_bytes_that_are_not_the_image():
    """APPn and COM segments (their length fields' counts) and whatever follows the EOI: what a
    JPEG passed through carries into its record besides its image."""
    plain = parse_jpeg(BASELINE).metadata
    assert plain == 16  # the JFIF APP0 segment Pillow writes: its length field says 16
    padded = _after_soi(BASELINE, b"\xff\xe2\x01\x02" + bytes(256) + b"\xff\xfe\x00\x03!")
    assert parse_jpeg(padded + bytes(1000)).metadata == plain + 258 + 3 + 1000
