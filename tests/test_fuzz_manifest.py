"""Fuzzing the manifest readers: any file gives a clear UserError or rows, never a traceback."""

import csv
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transforms.errors import ErrorRow, Reason, UserError
from transforms.manifest import (
    MAX_JSON_DEPTH,
    ManifestRow,
    ReadConfig,
    check_manifest,
    read_manifest,
)

CONFIG = ReadConfig(features=(("weight", "float"),))
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
cells = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)


def _outcome(suffix: str, body: bytes) -> list:
    """check_manifest then read_manifest, as the launcher and a worker would."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"m{suffix}"
        path.write_bytes(body)
        try:
            check_manifest(str(path), CONFIG)
        except UserError as error:
            assert str(error) and "\n" not in str(error)
            return []
        items = list(read_manifest(str(path), 0, CONFIG))
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


@FUZZ
@given(st.lists(st.fixed_dictionaries({"image_uri": cells, "label": cells, "weight": cells})))
def test_csv_round_trips_every_usable_row(rows):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.csv"
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=["image_uri", "label", "weight"])
            writer.writeheader()
            writer.writerows(rows)
        items = _outcome(".csv", path.read_bytes())
    if not rows:
        return
    assert len(items) == len(rows)  # one row or one error per manifest record
    for row, item in zip(rows, items, strict=True):
        if isinstance(item, ManifestRow):
            assert item.label == row["label"].strip() and item.key == row["image_uri"].strip()


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
