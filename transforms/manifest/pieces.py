"""Lines of a text manifest by byte range, so one file can be read as many bounded pieces.

A manifest line is a record. A piece [start, end) of a file owns the lines that begin in it: the
first begins right after the first newline at or after byte start - 1 (at `start` itself when
the piece starts the body), and the last is the one that begins before `end`, read to its own
newline even past `end`. So pieces that tile a file read every line exactly once, whatever the
boundaries, and a line is known by the byte offset where it begins, which needs no knowledge of
the lines before it. Lines end with `\\n` (`\\r\\n` too: the `\\r` is the record's to drop).
Nothing here knows Beam; the Beam step claims each line's offset (transforms/beam/manifests.py).
"""

from collections.abc import Callable, Iterator

READ_BYTES = 1 << 20  # one read from the file or object
MAX_LINE_BYTES = 1 << 20  # longer lines are never held: reported by their offset alone (None)
BOM = b"\xef\xbb\xbf"

Read = Callable[[int], bytes]  # a binary stream's read(size), positioned where reading begins


def lines_from(
    read: Read,
    offset: int,
    end: int,
    skip_first: bool = False,
    limit: int = MAX_LINE_BYTES,
    read_bytes: int = READ_BYTES,
) -> Iterator[tuple[int, bytes | None]]:
    """(offset, line without its newline) for each line beginning in [offset, end), the stream
    positioned at `offset` and read `read_bytes` at a time. A line over `limit` bytes is
    (offset, None), never held whole. `skip_first`: the first line is the tail of one that
    began before `offset`: not ours."""
    pending, dropped = b"", 0  # the line being read; how many of its bytes were let go
    while offset < end and (chunk := read(read_bytes)):
        lines = chunk.split(b"\n")
        if len(lines) > 1:  # the pending line ends in this chunk
            first = pending + lines[0]
            if not skip_first:
                yield offset, (None if dropped or len(first) > limit else first)
            offset += dropped + len(first) + 1
            skip_first, dropped = False, 0
            for line in lines[1:-1]:
                if offset >= end:
                    return
                yield offset, (line if len(line) <= limit else None)
                offset += len(line) + 1
            pending = lines[-1]
        else:
            pending += chunk
        if len(pending) > limit:  # the line goes on: keep only its length
            dropped += len(pending)
            pending = b""
    if (pending or dropped) and offset < end and not skip_first:  # no newline at the end
        yield offset, (None if dropped else pending)


def piece_lines(
    seek: Callable[[int], object],
    read: Read,
    start: int,
    end: int,
    body: int,
    read_bytes: int = READ_BYTES,
) -> Iterator[tuple[int, bytes | None]]:
    """The lines a piece [start, end) owns, of a file whose records begin at byte `body` (after
    a CSV's header line). A line at byte 0 may begin with a UTF-8 byte order mark (BOM)."""
    after_body_start = start > body
    offset = start - 1 if after_body_start else start
    seek(offset)
    return lines_from(read, offset, end, after_body_start, read_bytes=read_bytes)
