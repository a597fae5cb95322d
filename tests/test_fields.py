"""transforms/manifest/fields.py at the unit tier: a record's fields as a checked ManifestRow,
or an ErrorRow that says why not. (Labels: tests/test_multilabel.py; every reader end to end:
tests/test_pipeline.py and tests/test_hostile_files.py.)"""

import pytest

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, RowError, UserError
from tfrecord_pipeline.transforms.manifest.fields import check_columns, make_row, record_row
from tfrecord_pipeline.transforms.manifest.rows import (
    DroppedNegative,
    ManifestRow,
    ReadConfig,
    row_position,
)

CONFIG = ReadConfig(features=(("weight", "float"), ("id", "int64")))
FIELDS = {"url": " a.jpg ", "label": "cat", "weight": "0.5", "id": "7", "split": "train"}


def test_a_record_becomes_a_row_that_knows_where_it_came_from():
    row = record_row(FIELDS, 12, "/data/", "/data/m.csv", 3, CONFIG)
    features = (("weight", 0.5), ("id", 7))
    position = row_position(3, 12)
    assert row == ManifestRow(
        "a.jpg", "a.jpg", "cat", "train", features, "/data/m.csv", position, "/data/"
    )
    assert (row.image_uri, row.source) == ("/data/a.jpg", "/data/m.csv@12")


def test_an_absolute_image_is_not_put_under_the_manifests_folder_or_the_image_root():
    config = CONFIG._replace(image_root="/images/")
    assert make_row({**FIELDS, "url": "gs://b/a.jpg"}, "/data/", "m.csv", 0, config).folder == ""
    assert make_row(FIELDS, "/data/", "m.csv", 0, config).image_uri == "/images/a.jpg"


@pytest.mark.parametrize(
    ("change", "reason", "message"),
    [
        ({"label": None}, Reason.BAD_ROW, "image_uri and label are required"),
        ({"url": "a\x00.jpg"}, Reason.BAD_ROW, "NUL character"),
        ({"split": 3}, Reason.BAD_SPLIT, "split must be text"),
        ({"weight": "heavy"}, Reason.BAD_FEATURE, "weight='heavy' is not float"),
        ({"id": str(1 << 63)}, Reason.BAD_FEATURE, "is not int64"),
        ({"objects": []}, Reason.BAD_ANNOTATION, "objects in a classification dataset"),
    ],
)
def test_a_record_that_breaks_a_rule_is_an_error_row_with_its_fields(change, reason, message):
    item = record_row({**FIELDS, **change}, 40, "", "m.csv", 0, CONFIG)
    assert isinstance(item, ErrorRow) and item.source == "m.csv@40"
    assert item.reason is reason and message in item.message
    assert ("label", str({**FIELDS, **change}["label"])) in item.row


def test_the_parsers_error_becomes_the_error_row():
    item = record_row(RowError(Reason.BAD_ROW, "not JSON"), 5, "", "m.jsonl", 0, CONFIG)
    assert (item.key, item.source, item.message) == ("m.jsonl@5", "m.jsonl@5", "not JSON")


def test_a_detection_row_without_objects_can_be_dropped_and_counted():
    config = ReadConfig(detection=True, drop_negatives=True)
    item = record_row({"image_uri": "a.jpg", "objects": []}, 0, "", "m.jsonl", 0, config)
    assert item == DroppedNegative("m.jsonl@0")


def test_a_header_without_a_required_column_cannot_give_a_row():
    check_columns("m.csv", ["url", "label", "weight", "id"], CONFIG)
    with pytest.raises(UserError, match=r"missing column\(s\) image_uri, id; header is"):
        check_columns("m.csv", ["label", "weight"], CONFIG)
