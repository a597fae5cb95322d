"""One line of a CSV or JSONL manifest as its fields (transforms/manifest/fields.py makes the row).

A record is one line, so any piece of a file can be read on its own (transforms/manifest/
pieces.py). A line that cannot be parsed is a RowError: an error row of its own, never the end
of the run.
"""

import csv
import json
import re
from collections.abc import Iterable, Iterator

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.manifest.pieces import BOM, MAX_LINE_BYTES

# A usable JSONL row is one object of scalars (depth 1); much deeper nesting is only ever an
# attack on the parser, which recurses once per level.
MAX_JSON_DEPTH = 16
# A JSON string, unrolled (a character matches one way only, so a failed match gives back
# linearly): Python 3.10, which TPU VM images ship, has no possessive quantifiers.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
# A \uD800-\uDFFF escape: half of a pair (an emoji) or, alone, a surrogate no UTF-8 text holds;
# looked for in a JSONL line's text and in a COCO document's bytes.
_SURROGATE_ESCAPE = {
    str: re.compile(r"\\u[dD][89a-fA-F]"),
    bytes: re.compile(rb"\\u[dD][89a-fA-F]"),
}
_JSON_BRACKET = re.compile(r"[\[\]{}]")
_CSV_FIELD_LIMIT = csv.field_size_limit()  # longer fields are the csv module's to refuse
LONG_LINE = f"a line over {MAX_LINE_BYTES:,} bytes"
QUOTED_NEWLINE = "a quoted field runs past the end of its line (a CSV record is one line)"


def decoded(line: bytes | None) -> str:
    """A manifest line as text; a line too long to hold, or not UTF-8, is a bad row."""
    if line is None:
        raise RowError(Reason.BAD_ROW, LONG_LINE)
    try:
        return line.decode()
    except UnicodeDecodeError as error:
        raise RowError(Reason.BAD_ROW, not_utf8(error)) from None


def not_utf8(error: UnicodeDecodeError) -> str:
    return f"not UTF-8 text (bytes {error.object[error.start : error.end].hex(' ')})"


def csv_cells(line: str) -> list[str]:
    """The cells of one CSV line (given without its newline), as the csv module reads them: []
    for a blank line. A record is one line, so a piece of a file can start at any line: a
    quoted field that runs past the end of its line (a newline inside quotes) makes the line a
    bad row."""
    try:
        cells = next(csv.reader((line + "\n",)), [])
    except csv.Error as error:  # e.g. a field over the csv module's size limit
        raise RowError(Reason.BAD_ROW, f"unparseable CSV: {error}") from None
    if cells and "\n" in cells[-1]:  # the line's own newline, swallowed by an open quote
        raise RowError(Reason.BAD_ROW, QUOTED_NEWLINE)
    return cells


def csv_fields(line: str, columns: tuple[str, ...]) -> dict | None:
    """The fields of one CSV line under its file's header; None for a blank line. Missing
    trailing cells read as None, as csv.DictReader gives them. A line without quotes or a
    carriage return before its end (nearly every line) is split on its commas: what the csv
    module makes of it, at a fifth of the cost."""
    body = line[:-1] if line.endswith("\r") else line
    if '"' not in body and "\r" not in body and len(body) <= _CSV_FIELD_LIMIT:
        cells = body.split(",") if body else []
    else:
        cells = csv_cells(line)
    if len(cells) == len(columns):
        return dict(zip(columns, cells, strict=True))
    if not cells:
        return None
    if len(cells) > len(columns):
        raise RowError(Reason.BAD_ROW, "more cells than columns")
    return dict(zip(columns, cells + [None] * (len(columns) - len(cells)), strict=True))


def nests_too_deep(body: str) -> bool:
    """Whether a JSON text nests deeper than MAX_JSON_DEPTH, found without parsing it (brackets
    inside strings do not count). A plain row has too few brackets to need the scan."""
    if body.count("[") + body.count("{") <= MAX_JSON_DEPTH:
        return False
    depth = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", body)):
        depth += 1 if bracket in "[{" else -1
        if depth > MAX_JSON_DEPTH:
            return True
    return False


def jsonl_fields(line: str, columns: tuple[str, ...] = ()) -> dict | None:
    """The fields of one JSONL line; None for a blank line."""
    if not line.strip():
        return None
    if nests_too_deep(line):
        raise RowError(Reason.BAD_ROW, f"JSON nested deeper than {MAX_JSON_DEPTH}")
    try:
        fields = json.loads(line)
    except ValueError as error:
        raise RowError(Reason.BAD_ROW, f"not JSON: {error}") from None
    if not isinstance(fields, dict):
        raise RowError(Reason.BAD_ROW, "a JSONL line must be an object")
    check_unicode(line, fields)
    return fields


def check_unicode(text: str | bytes, parsed: object) -> None:
    """Raises RowError when a string JSON `text` parsed into holds half a surrogate pair: JSON
    lets `\\ud800` stand alone, and no path, key or label can hold it (UTF-8 has no surrogates)
    to be opened, hashed or written. Only text with such an escape is looked at twice."""
    if not _SURROGATE_ESCAPE[type(text)].search(text):
        return
    try:
        json.dumps(parsed, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise RowError(
            Reason.BAD_ROW, "a JSON string holds half a surrogate pair (\\uD800-\\uDFFF)"
        ) from None


def line_records(
    lines: Iterable[tuple[int, bytes | None]], kind: str, columns: tuple[str, ...]
) -> Iterator[tuple[int, dict | RowError]]:
    """(byte offset, fields or RowError) of each non-blank line of a CSV (under `columns`, its
    header) or JSONL manifest, from (byte offset, line) pairs."""
    parse = csv_fields if kind == "csv" else jsonl_fields
    for offset, line in lines:
        if offset == 0 and line:
            line = line.removeprefix(BOM)
        try:
            if line is None:
                raise RowError(Reason.BAD_ROW, LONG_LINE)
            fields = parse(line.decode(), columns)
        except UnicodeDecodeError as error:
            yield offset, RowError(Reason.BAD_ROW, not_utf8(error))
            continue
        except RowError as error:
            yield offset, error
            continue
        if fields is not None:
            yield offset, fields
