"""transforms/manifest/rows.py: CSV and JSONL lines to rows or error rows, single and multiple
labels; fuzzed, any file gives a clear UserError or rows, never a traceback."""

import csv
import io
import json
import re
import tempfile
from pathlib import Path

import pytest
from conftest import (
    read_manifest,
    write_manifest,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, RowError, UserError
from tfrecord_pipeline.transforms.manifest.fields import make_row
from tfrecord_pipeline.transforms.manifest.lines import (
    MAX_JSON_DEPTH,
    QUOTED_NEWLINE,
    csv_cells,
    csv_fields,
)
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig, row_position
from tfrecord_pipeline.transforms.manifest.sources import describe
from tfrecord_pipeline.transforms.manifest.splits import parse_split_spec

CONFIG = ReadConfig(features=(("weight", "float"),))
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
cells = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)
one_line = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\n"), max_size=12
)


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
@given(
    st.lists(st.fixed_dictionaries({"image_uri": one_line, "label": one_line, "weight": one_line}))
)
def test_csv_round_trips_every_usable_row(rows):
    items = _outcome(".csv", _csv(rows))
    if not rows:
        return
    assert len(items) == len(rows)  # one row or one error per manifest record
    for row, item in zip(rows, items, strict=True):
        if isinstance(item, ManifestRow):
            assert item.label == row["label"].strip() and item.key == row["image_uri"].strip()


@FUZZ
@given(
    st.lists(st.fixed_dictionaries({"image_uri": one_line, "label": one_line}), min_size=1),
    st.text(min_size=1),
    st.text(),
)
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
        Reason.BAD_ROW,
        QUOTED_NEWLINE,
    )


@FUZZ
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["image_uri", "label", "weight", "x"]),
            st.one_of(
                cells, st.integers(), st.floats(), st.none(), st.lists(st.integers(), max_size=2)
            ),
        )
    )
)
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
@given(
    st.text(
        alphabet=st.sampled_from(",,,\r \x00ab\u00e9\u2028")
        | st.characters(blacklist_categories=["Cs"], blacklist_characters='"\n')
    ),
    st.integers(1, 6),
)
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


def test_csv_rows_resolve_relative_paths_and_keep_keys(tmp_path):
    manifest = write_manifest(
        tmp_path / "m.csv",
        [
            {"image_uri": "a/1.jpg", "label": "cat", "split": "", "key": "", "w": "3"},
            {"image_uri": "/abs/2.jpg", "label": "dog", "split": "test", "key": "k2", "w": "x"},
            {"image_uri": "a/3.jpg", "label": " ", "split": "", "key": "", "w": "1"},
        ],
    )
    config = ReadConfig(parse_split_spec("train=1"), (("w", "int64"),))
    rows = read_manifest(str(manifest), 0, config)
    first = len("image_uri,label,split,key,w\r\n")  # records are known by their byte offsets
    assert rows[0] == ManifestRow(
        "a/1.jpg",
        "a/1.jpg",
        "cat",
        "train",
        (("w", 3),),
        str(manifest),
        row_position(0, first),
        f"{tmp_path}/",
    )
    assert rows[0].image_uri == str(tmp_path / "a/1.jpg")
    assert rows[0].key is rows[0].image  # one string for both
    assert rows[0].source == f"{manifest}@{first}"
    assert isinstance(rows[1], ErrorRow) and rows[1].reason is Reason.BAD_FEATURE
    second = first + len("a/1.jpg,cat,,,3\r\n")
    assert rows[1].source == f"{manifest}@{second}"
    assert isinstance(rows[2], ErrorRow) and rows[2].reason is Reason.BAD_LABEL


@pytest.mark.parametrize("value", [str(1 << 63), str(-(1 << 63) - 1), "1e30"])
def test_int64_features_outside_int64_are_bad_features(tmp_path, value):
    manifest = write_manifest(
        tmp_path / "m.csv",
        [{"image_uri": "a.jpg", "label": "cat", "split": "", "key": "", "w": value}],
    )
    config = ReadConfig(parse_split_spec("train=1"), (("w", "int64"),))
    (row,) = read_manifest(str(manifest), 0, config)
    assert isinstance(row, ErrorRow) and row.reason is Reason.BAD_FEATURE


def test_jsonl_rows_and_bad_lines(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(
        json.dumps({"image_uri": "x.jpg", "label": 3})
        + "\n\n{not json\n[1]\n"
        + json.dumps({"label": "a"})
        + "\n"
        + json.dumps({"image_uri": "y.jpg", "label": ["a"]})
        + "\n"
        + json.dumps({"image_uri": "y.jpg", "label": True})
        + "\n"
        + json.dumps({"image_uri": "y.jpg", "label": "a", "split": 1})
        + "\n"
    )
    rows = read_manifest(str(path), 1, ReadConfig())
    assert rows[0].label == "3" and rows[0].position == row_position(1, 0)
    assert [r.reason for r in rows[1:]] == [Reason.BAD_ROW] * 3 + [Reason.BAD_LABEL] * 2 + [
        Reason.BAD_SPLIT
    ]


def test_json_nested_past_the_limit_is_one_bad_row(tmp_path):
    deep = "[" * 200_000 + "]" * 200_000  # json.loads would raise RecursionError
    at_limit = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)
    lines = [
        {"image_uri": "a.jpg", "label": "cat"},
        f'{{"image_uri": "b.jpg", "label": {deep}}}',
        f'{{"image_uri": "c.jpg", "label": "cat", "x": {at_limit}}}',  # depth 16: parsed
        f'{{"image_uri": "d.jpg", "label": "cat", "x": [{at_limit}]}}',  # depth 17
        {"image_uri": "e.jpg", "label": "[" * 100 + "{" * 100},  # brackets in a string
    ]
    path = tmp_path / "m.jsonl"
    path.write_text("".join((json.dumps(x) if isinstance(x, dict) else x) + "\n" for x in lines))
    describe(str(path), 0, ReadConfig())
    rows = read_manifest(str(path), 0, ReadConfig())
    assert [type(row).__name__ for row in rows] == [
        "ManifestRow",
        "ErrorRow",
        "ManifestRow",
        "ErrorRow",
        "ManifestRow",
    ]
    assert rows[1].reason is Reason.BAD_ROW and rows[1].message == "JSON nested deeper than 16"
    assert rows[3].reason is Reason.BAD_ROW and rows[4].label == "[" * 100 + "{" * 100


def test_half_a_surrogate_pair_in_a_jsonl_string_is_one_bad_row(tmp_path):
    """JSON lets `\\ud800` stand alone; no path, key or label can hold it (UTF-8 has no
    surrogates), and it once reached the key's hash as a traceback. A whole pair is an emoji."""
    lines = [
        r'{"image_uri": "a.jpg", "label": "cat\ud800"}',
        r'{"image_uri": "b.jpg", "label": "cat", "key": "k\uDFFF"}',
        r'{"image_uri": "c.jpg", "label": "cat\ud83d\ude00"}',
        r'{"image_uri": "d.jpg", "label": "cat\\ud800"}',  # an escaped backslash, then text
    ]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    rows = read_manifest(str(path), 0, ReadConfig())
    assert [getattr(row, "reason", None) for row in rows] == [Reason.BAD_ROW] * 2 + [None] * 2
    assert "half a surrogate pair" in rows[0].message
    assert [row.label for row in rows[2:]] == ["cat\U0001f600", "cat\\ud800"]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_nul_and_control_characters_are_error_rows(tmp_path, suffix):
    rows = [
        {"image_uri": "ok.jpg", "label": "café noir"},
        {"image_uri": "a\x00.jpg", "label": "cat"},
        {"image_uri": "b.jpg", "label": "c\x00at"},
        {"image_uri": "c.jpg", "label": "two\nlines"},
        {"image_uri": "d.jpg", "label": "tab\there"},
        {"image_uri": "e.jpg", "label": "line\u2028separator"},
        {"image_uri": "f.jpg", "label": "c1\x85control"},
    ]
    path = tmp_path / f"m{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    else:
        body = "".join(f'"{row["image_uri"]}","{row["label"]}"\n' for row in rows)
        path.write_text("image_uri,label\n" + body, newline="")
    read = read_manifest(str(path), 0, ReadConfig())
    assert isinstance(read[0], ManifestRow) and read[0].label == "café noir"
    newline = [(Reason.BAD_LABEL, "label holds control character U+000A")]
    if (
        suffix == ".csv"
    ):  # a CSV record is one line: its first line is one bad row, the next another
        newline = [
            (Reason.BAD_ROW, QUOTED_NEWLINE),
            (Reason.BAD_ROW, "image_uri and label are required"),
        ]
    assert [(row.reason, row.message) for row in read[1:]] == [
        (Reason.BAD_ROW, "image_uri contains a NUL character"),
        (Reason.BAD_LABEL, "label holds control character U+0000"),
        *newline,
        (Reason.BAD_LABEL, "label holds control character U+0009"),
        (Reason.BAD_LABEL, "label holds control character U+2028"),
        (Reason.BAD_LABEL, "label holds control character U+0085"),
    ]


MULTI = ReadConfig(label_separator="|")


def _row(label, config: ReadConfig = MULTI):
    return make_row({"image_uri": "a.jpg", "label": label}, "", "m.csv", 1, config)


@pytest.mark.parametrize(
    "label, labels",
    [
        ("cat|dog", ("cat", "dog")),
        ("dog | cat|dog", ("cat", "dog")),  # trimmed, each once, sorted
        ("cat", ("cat",)),
        (["dog", "cat", 3], ("3", "cat", "dog")),
        ([], ()),  # a JSON list may say: none of the labels
        (7, ("7",)),
        ("a||b|", ("a", "b")),
    ],
)
def test_a_label_cell_or_list_becomes_the_sorted_distinct_labels(label, labels):
    assert _row(label).label == labels


@pytest.mark.parametrize(
    "label", ["", " | ", [["nested"]], [True], True, {"a": 1}, ["ok", "bad\nline"], 1.5]
)
def test_labels_that_cannot_be_a_list_of_labels_are_bad_label_rows(label):
    with pytest.raises(RowError) as raised:
        _row(label)
    assert raised.value.reason == Reason.BAD_LABEL


def test_without_the_flag_a_separator_is_part_of_the_one_label():
    assert _row("cat|dog", ReadConfig()).label == "cat|dog"
