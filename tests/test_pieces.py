"""Record boundaries by byte range (transforms/manifest/pieces.py): pieces that tile a file read
every line once, wherever the cuts fall and however short the reads."""

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from tfrecord_pipeline.transforms.manifest.pieces import lines_from, piece_lines


class ShortReads(io.BytesIO):
    """A stream that returns at most `most` bytes a read, as a socket or pipe may."""

    def __init__(self, data: bytes, most: int):
        super().__init__(data)
        self.most = most

    def read(self, size=-1):
        return super().read(min(size, self.most) if size >= 0 else self.most)


def _piece(data: bytes, start: int, end: int, body: int = 0, most: int = 1 << 20) -> list:
    stream = ShortReads(data, most)
    return list(piece_lines(stream.seek, stream.read, start, end, body))


def _lines(data: bytes, body: int = 0) -> list[tuple[int, bytes]]:
    """The lines of data[body:] with their offsets, found the plain way."""
    parts = data[body:].split(b"\n")
    if parts[-1] == b"":  # what follows the last newline (or an empty file) is no line
        parts.pop()
    offsets = [body]
    for line in parts:
        offsets.append(offsets[-1] + len(line) + 1)
    return list(zip(offsets, parts, strict=False))


def test_a_piece_owns_the_lines_that_begin_in_it():
    data = b"ab\ncd\n\nefg"
    assert _piece(data, 0, len(data)) == [(0, b"ab"), (3, b"cd"), (6, b""), (7, b"efg")]
    assert _piece(data, 0, 1) == [(0, b"ab")]  # read to its newline, past the piece's end
    assert _piece(data, 1, 3) == []  # byte 2 is a newline: the next line begins at 3
    assert _piece(data, 3, 4) == [(3, b"cd")]  # a piece that begins at a line's first byte
    assert _piece(data, 4, 8) == [(6, b""), (7, b"efg")]
    assert _piece(data, 8, 10) == []


def test_a_csv_body_begins_after_its_header():
    data = b"image_uri,label\nx.jpg,a\n"
    assert _piece(data, 16, len(data), body=16) == [(16, b"x.jpg,a")]
    assert _piece(data, 17, len(data), body=16) == []


def test_a_line_over_the_limit_is_never_held():
    data = b"short\n" + b"x" * 50 + b"\nnext\n" + b"y" * 30
    stream = ShortReads(data, 7)
    lines = list(lines_from(stream.read, 0, len(data), limit=20, read_bytes=8))
    assert lines == [(0, b"short"), (6, None), (57, b"next"), (62, None)]


def test_a_long_partial_line_before_a_piece_is_skipped():
    data = b"x" * 50 + b"\nnext\n"
    stream = ShortReads(data, 7)
    stream.seek(9)
    assert list(lines_from(stream.read, 9, len(data), True, limit=20, read_bytes=8)) == [
        (51, b"next")
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r\n", b"\xef\xbb\xbf"]), max_size=40),
    st.lists(st.integers(0, 200), max_size=8),
    st.integers(1, 9),
    st.booleans(),
)
def test_pieces_that_tile_a_file_read_each_line_once(parts, cuts, most, has_header):
    data = b"".join(parts)
    body = data.find(b"\n") + 1 if has_header else 0
    bounds = sorted({body, len(data), *(body + cut for cut in cuts if body + cut < len(data))})
    pieces = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        pieces += _piece(data, start, end, body, most)
    assert pieces == _lines(data, body)
