"""transforms/manifest/lines.py at the unit tier: a CSV or JSONL line as its fields, or the
RowError that makes it an error row. (Agreement with the csv module, under fuzzing:
tests/test_rows.py; hostile lines: tests/test_hostile_files.py.)"""

import pytest

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.manifest.lines import (
    LONG_LINE,
    csv_fields,
    decoded,
    jsonl_fields,
    line_records,
    nests_too_deep,
)
from tfrecord_pipeline.transforms.manifest.pieces import BOM

COLUMNS = ("image_uri", "label")


def _records(kind: str, lines: list[tuple[int, bytes | None]]) -> list:
    return [
        (offset, fields if isinstance(fields, dict) else fields.message)
        for offset, fields in line_records(lines, kind, COLUMNS)
    ]


def test_a_csv_line_has_its_cells_under_the_header_missing_ones_as_none():
    assert csv_fields("a.jpg,cat\r", COLUMNS) == {"image_uri": "a.jpg", "label": "cat"}
    assert csv_fields("a.jpg", COLUMNS) == {"image_uri": "a.jpg", "label": None}
    assert csv_fields('"a,b.jpg",cat', COLUMNS) == {"image_uri": "a,b.jpg", "label": "cat"}
    assert csv_fields("", COLUMNS) is None
    with pytest.raises(RowError, match="more cells than columns"):
        csv_fields("a.jpg,cat,extra", COLUMNS)


def test_a_jsonl_line_is_one_object():
    assert jsonl_fields('{"image_uri": "a.jpg", "label": 3}') == {"image_uri": "a.jpg", "label": 3}
    assert jsonl_fields("   ") is None
    for line, message in (("[1, 2]", "must be an object"), ("{", "not JSON")):
        with pytest.raises(RowError, match=message):
            jsonl_fields(line)


def test_nesting_is_counted_outside_strings_only():
    deep = "[" * 17 + "]" * 17
    assert nests_too_deep(deep) and not nests_too_deep('"' + deep + '"')
    assert not nests_too_deep("[" * 16 + "]" * 16)


def test_a_line_too_long_or_not_utf8_is_a_bad_row():
    with pytest.raises(RowError, match=LONG_LINE) as raised:
        decoded(None)
    assert raised.value.reason is Reason.BAD_ROW
    with pytest.raises(RowError, match="not UTF-8 text \\(bytes ff\\)"):
        decoded(b"a\xff.jpg")


def test_records_skip_blank_lines_and_strip_a_bom_only_at_the_start_of_the_file():
    lines = [(0, BOM + b"a.jpg,cat"), (14, b""), (15, BOM + b"b.jpg,dog"), (30, None)]
    assert _records("csv", lines) == [
        (0, {"image_uri": "a.jpg", "label": "cat"}),
        (15, {"image_uri": BOM.decode() + "b.jpg", "label": "dog"}),
        (30, LONG_LINE),
    ]
    assert _records("jsonl", [(0, b'{"label": "\\ud800"}'), (20, b"\xff")]) == [
        (0, "a JSON string holds half a surrogate pair (\\uD800-\\uDFFF)"),
        (20, "not UTF-8 text (bytes ff)"),
    ]
