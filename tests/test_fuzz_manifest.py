"""Fuzzing the manifest readers: any file gives a clear UserError or rows, never a traceback."""

import csv
import io
import json
import re
import tempfile
from pathlib import Path

import pytest
from conftest import read_manifest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transforms.errors import ErrorRow, Reason, RowError, UserError
from transforms.manifest.lines import MAX_JSON_DEPTH, QUOTED_NEWLINE, csv_cells, csv_fields
from transforms.manifest.rows import ManifestRow, ReadConfig
from transforms.manifest.sources import describe

CONFIG = ReadConfig(features=(("weight", "float"),))
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
cells = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)
one_line = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\n"),
                   max_size=12)  # fmt: skip


def _outcome(suffix: str, body: bytes) -> list:
    """The launcher's check, then the whole read, as the local runner does them."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"m{suffix}"
        path.write_bytes(body)
        try:
            describe(str(path), 0, CONFIG)
        except UserError as error:
            assert str(error) and "\n" not in str(error)
            return []
        items = read_manifest(str(path), 0, CONFIG)
    assert all(isinstance(item, ManifestRow | ErrorRow) for item in items)
    return items


@FUZZ
@given(st.binary(max_size=300), st.sampled_from([".csv", ".jsonl"]))
def test_arbitrary_bytes(body, suffix):
    _outcome(suffix, body)


@FUZZ
@given(st.text(alphabet="image_uri,label,weight\n\r\"' ,{}[]:0.5x\x00é", max_size=200))
def test_arbitrary_csv_like_text(body):
    _outcome(".csv", body.encode())


def _csv(rows: list[dict]) -> bytes:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=["image_uri", "label", "weight"])
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue().encode()


@FUZZ
@given(st.lists(st.fixed_dictionaries({"image_uri": one_line, "label": one_line,
                                       "weight": one_line})))  # fmt: skip
def test_csv_round_trips_every_usable_row(rows):
    items = _outcome(".csv", _csv(rows))
    if not rows:
        return
    assert len(items) == len(rows)  # one row or one error per manifest record
    for row, item in zip(rows, items, strict=True):
        if isinstance(item, ManifestRow):
            assert item.label == row["label"].strip() and item.key == row["image_uri"].strip()


@FUZZ
@given(st.lists(st.fixed_dictionaries({"image_uri": one_line, "label": one_line}), min_size=1),
       st.text(min_size=1), st.text())  # fmt: skip
def test_a_quoted_newline_makes_its_line_a_bad_row_and_changes_no_line_before(rows, left, right):
    """A CSV record is one line: a newline inside quotes ends it there, as a bad_row, and every
    line before reads as it would without it."""

    def seen(items):  # what each item says, and the byte offset of its line
        said = [i.reason if isinstance(i, ErrorRow) else i.label for i in items]
        return list(zip(said, [i.source.rsplit("@")[1] for i in items], strict=True))

    broken = {"image_uri": "a.jpg", "label": f"{left}\n{right}", "weight": "1"}
    before = _outcome(".csv", _csv(rows))
    items = _outcome(".csv", _csv([*rows, broken]))
    assert seen(items[: len(before)]) == seen(before)
    assert (items[len(before)].reason, items[len(before)].message) == (
        Reason.BAD_ROW, QUOTED_NEWLINE
    )  # fmt: skip


@FUZZ
@given(st.lists(st.dictionaries(st.sampled_from(["image_uri", "label", "weight", "x"]),
                                st.one_of(cells, st.integers(), st.floats(), st.none(),
                                          st.lists(st.integers(), max_size=2)))))  # fmt: skip
def test_jsonl_with_any_value_types(rows):
    body = "".join(json.dumps(row) + "\n" for row in rows).encode()
    items = _outcome(".jsonl", body)
    assert not items or len(items) == len(rows)


def _depth(value) -> int:
    if isinstance(value, dict | list):
        children = value.values() if isinstance(value, dict) else value
        return 1 + max(map(_depth, children), default=0)
    return 0


# Text with the characters a bracket count must not be fooled by: quotes, escapes, brackets.
tricky = st.text(alphabet='[]{}"\\, ab', max_size=8)
nested = st.recursive(
    st.none() | st.integers() | tricky,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky, inner, max_size=3),
    max_leaves=60,
)


@FUZZ
@given(st.lists(st.tuples(nested, st.integers(0, 2 * MAX_JSON_DEPTH)), min_size=1, max_size=5))
def test_jsonl_nesting_is_bad_row_exactly_past_the_limit(values):
    """Whatever the strings inside, the bracket scan agrees with the parsed depth: a line
    deeper than the limit is a bad_row, any other line parses."""
    rows = []
    for value, wrap in values:
        for _ in range(wrap):
            value = [value]
        rows.append({"image_uri": "a.jpg", "label": "cat", "x": value})
    items = _outcome(".jsonl", "".join(json.dumps(row) + "\n" for row in rows).encode())
    deep = [_depth(row) > MAX_JSON_DEPTH for row in rows]
    assert [isinstance(item, ErrorRow) and item.reason is Reason.BAD_ROW for item in items] == deep


def test_a_field_over_the_csv_size_limit_is_one_bad_row():
    body = "image_uri,label,weight\na.jpg," + "x" * 200_000 + ",1\nb.jpg,y,2\n"
    items = _outcome(".csv", body.encode())
    assert [type(item).__name__ for item in items] == ["ErrorRow", "ManifestRow"]
    assert items[0].reason.value == "bad_row" and items[1].key == "b.jpg"


@FUZZ
@given(st.text(alphabet=st.sampled_from(",,,\r \x00ab\u00e9\u2028") | st.characters(
    blacklist_categories=["Cs"], blacklist_characters='"\n')), st.integers(1, 6))  # fmt: skip
def test_a_line_without_quotes_is_split_as_the_csv_module_reads_it(line, width):
    """csv_fields splits most lines on their commas itself: it must agree with the csv module."""
    columns = tuple(f"c{i}" for i in range(width))
    try:
        expected = csv_cells(line)
    except RowError as error:
        with pytest.raises(RowError, match=re.escape(error.message)):
            csv_fields(line, columns)
        return
    try:
        fields = csv_fields(line, columns)
    except RowError as error:
        assert len(expected) > width and error.message == "more cells than columns"
        return
    if not expected:
        assert fields is None
    else:
        assert list(fields.values()) == expected + [None] * (width - len(expected))
