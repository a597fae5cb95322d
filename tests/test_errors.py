"""transforms/errors.py: an error row as `errors/` stores it, a value named in a message, and
every reason code documented."""

import json
import re
from pathlib import Path

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, shown


def test_an_error_row_is_one_json_line_of_stable_names_whatever_its_text():
    row = ErrorRow("k1", "m.csv@30", Reason.CORRUPT_IMAGE, "truncated", (("label", "café"),), "a")
    line = row.to_json()
    assert "\n" not in line and "café" in line  # UTF-8 as it is, not escaped
    stored = json.loads(line)
    assert list(stored) == ["key", "message", "reason", "row", "source", "split"]
    assert stored["reason"] == "corrupt_image" and stored["row"] == {"label": "café"}


def test_error_rows_sort_by_where_they_came_from_then_key_then_reason():
    rows = [
        ErrorRow("b", "m@9", Reason.BAD_ROW, ""),
        ErrorRow("a", "m@10", Reason.MISSING_FILE, ""),
        ErrorRow("a", "m@9", Reason.DUPLICATE_KEY, ""),
        ErrorRow("a", "m@9", Reason.BAD_LABEL, ""),
    ]
    ordered = sorted(rows, key=ErrorRow.sort_key)
    assert [(r.source, r.key, r.reason.value) for r in ordered] == [
        ("m@10", "a", "missing_file"),
        ("m@9", "a", "bad_label"),
        ("m@9", "a", "duplicate_key"),
        ("m@9", "b", "bad_row"),
    ]


def test_a_value_in_a_message_is_its_repr_cut_to_the_limit_with_its_length():
    assert shown("cat") == "'cat'" and shown([1, 2]) == "[1, 2]"
    assert shown("x" * 78) == repr("x" * 78)  # 80 characters with the quotes: whole
    assert shown("x" * 79) == f"'{'x' * 79}"[:80] + "... (81 characters)"
    assert shown(list(range(1000)), 10) == "[0, 1, 2, ... (4,890 characters)"


def test_every_reason_code_has_a_row_in_the_troubleshooting_table():
    page = Path(__file__).parents[1] / "docs" / "troubleshooting.md"
    table = page.read_text().split("## Reason codes", 1)[1]
    documented = {
        code
        for line in table.splitlines()
        if line.startswith("| `")
        for code in re.findall(r"`([a-z_]+)`", line.split(" | ")[0])
    }
    assert {reason.value for reason in Reason} <= documented
