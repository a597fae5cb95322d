"""The start of a text manifest, as the launcher reads it: what a JSON file is (JSONL rows, or a
COCO document), a CSV's header, and whether a record follows."""

import json

from tfrecord_pipeline.transforms.errors import RowError, UserError
from tfrecord_pipeline.transforms.manifest import pieces
from tfrecord_pipeline.transforms.manifest.coco import is_coco_start
from tfrecord_pipeline.transforms.manifest.fields import check_columns
from tfrecord_pipeline.transforms.manifest.lines import csv_cells, decoded
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig

HEAD_BYTES = 64 << 10  # the launcher's reads of a text manifest: its header and first lines


def json_kind(stream, size: int) -> tuple[str, bool]:
    """("coco" or "jsonl", whether its rows list objects), from a JSON manifest's start: its
    first row is read whole (a crowded image's objects run past the first read), up to the
    longest line a manifest may hold."""
    stream.seek(0)
    head = stream.read(HEAD_BYTES).removeprefix(pieces.BOM)
    if is_coco_start(head.decode("utf-8", "replace")):
        return "coco", True
    first = ""
    for _, line in pieces.piece_lines(stream.seek, stream.read, 0, size, 0, HEAD_BYTES):
        # a JSONL file's first lines are checked after; one too long is a bad row
        first = "" if line is None else line.removeprefix(pieces.BOM).decode("utf-8", "replace")
        if line is None or first.strip():
            break
    try:
        row = json.loads(first)
    except ValueError:
        return "jsonl", False  # its first row is a bad row, read as any other
    return "jsonl", isinstance(row, dict) and "objects" in row


def read_start(stream, path: str, kind: str, size: int, config: ReadConfig):
    """(a CSV's header, the byte where records begin, whether a record follows) from the first
    lines of a CSV or JSONL file; a line that begins past HEAD_BYTES counts as a record."""
    lines = pieces.piece_lines(stream.seek, stream.read, 0, size, 0, HEAD_BYTES)
    columns, body = (), 0
    if kind == "csv":
        _, header = next(lines, (0, b""))
        if header is None:
            raise UserError(f"{path}: no line end in the first {pieces.MAX_LINE_BYTES:,} bytes")
        try:
            columns = tuple(csv_cells(_start_text(path, header.removeprefix(pieces.BOM))))
        except RowError as error:
            raise UserError(f"{path}: the header: {error.message}") from None
        check_columns(path, columns, config)
        body = len(header) + 1
    for offset, line in lines:
        if offset >= HEAD_BYTES or line is None:
            return columns, body, True
        if _start_text(path, line.removeprefix(pieces.BOM) if offset == 0 else line).strip():
            return columns, body, True
    return columns, body, False


def _start_text(path: str, line: bytes) -> str:
    """A line at the start of a manifest as text: if it is not UTF-8, the file is not."""
    try:
        return decoded(line)
    except RowError as error:
        raise UserError(f"{path}: the manifest is {error.message}") from None
