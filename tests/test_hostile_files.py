"""Rows that would stop, stall or exhaust a run: NUL and control characters, JSON nested to
blow the parser's stack, integer labels int64 cannot hold. Each must become an error row while
the rest of the manifest is read."""

import json

import pytest

from transforms.errors import Reason, RowError
from transforms.labels import check_label, label_map_from_labels
from transforms.manifest import (
    MAX_JSON_DEPTH,
    ManifestRow,
    ReadConfig,
    check_manifest,
    read_manifest,
)

INT64_MIN = -(1 << 63)


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
    check_manifest(str(path), ReadConfig())
    rows = list(read_manifest(str(path), 0, ReadConfig()))
    assert [type(row).__name__ for row in rows] == [
        "ManifestRow", "ErrorRow", "ManifestRow", "ErrorRow", "ManifestRow"
    ]  # fmt: skip
    assert rows[1].reason is Reason.BAD_ROW and rows[1].message == "JSON nested deeper than 16"
    assert rows[3].reason is Reason.BAD_ROW and rows[4].label == "[" * 100 + "{" * 100


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
    read = list(read_manifest(str(path), 0, ReadConfig()))
    assert isinstance(read[0], ManifestRow) and read[0].label == "café noir"
    assert [(row.reason, row.message) for row in read[1:]] == [
        (Reason.BAD_ROW, "image_uri contains a NUL character"),
        (Reason.BAD_LABEL, "label holds control character U+0000"),
        (Reason.BAD_LABEL, "label holds control character U+000A"),
        (Reason.BAD_LABEL, "label holds control character U+0009"),
        (Reason.BAD_LABEL, "label holds control character U+2028"),
        (Reason.BAD_LABEL, "label holds control character U+0085"),
    ]


def test_integer_labels_outside_int64_are_bad_labels_not_wrapped():
    labels = ["1", "2", str(INT64_MIN), str(1 << 63), "-" + "9" * 25, "7" * 5000, "0" * 30 + "5"]
    label_map = label_map_from_labels(labels)
    assert label_map.integers  # ids stay the integers: one bad label changes no other id
    assert label_map.names == (str(INT64_MIN), "1", "2", "0" * 30 + "5")
    assert [label_map.id_of(label) for label in label_map.names] == [INT64_MIN, 1, 2, 5]
    for label in labels[3:6]:
        with pytest.raises(RowError, match="outside the int64 range") as error:
            label_map.id_of(label)
        assert error.value.reason is Reason.BAD_LABEL and len(str(error.value)) < 120
    assert check_label(" 7 ") == "7"
