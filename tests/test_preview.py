"""pipeline/read/preview.py's choice of records, pure: rows per class, or a seeded sample laid
out in a square (the contact sheet drawn and saved, end to end: test_read_side.py)."""

from tfrecord_pipeline.read.preview import pick
from tfrecord_pipeline.transforms.tfrecord.examples import LABEL_KEY, OBJECT_LABEL_KEY


def _records(*labels) -> list[dict]:
    return [{"n": number, LABEL_KEY: label} for number, label in enumerate(labels)]


def test_per_class_rows_are_in_label_order_and_hold_the_first_records_of_each():
    records = _records(2, 0, 2, 2, 0, 1)
    rows = pick(iter(records), per_class=2, sample=None, seed=0)
    assert [[record["n"] for record in row] for row in rows] == [[1, 4], [5], [0, 2]]


def test_a_record_of_several_labels_or_objects_is_in_the_row_of_each():
    several = {LABEL_KEY: [3, 1, 3]}
    boxes = {OBJECT_LABEL_KEY: [1, 5]}
    rows = pick([several, boxes], per_class=5, sample=None, seed=0)
    assert rows == [[several, boxes], [several], [boxes]]


def test_a_sample_is_the_same_for_a_seed_and_laid_out_in_a_square():
    records = _records(*range(100))
    chosen = pick(iter(records), per_class=None, sample=10, seed=7)
    assert [len(row) for row in chosen] == [4, 4, 2]
    assert chosen == pick(iter(records), per_class=None, sample=10, seed=7)
    assert chosen != pick(iter(records), per_class=None, sample=10, seed=8)
    picked = [record["n"] for row in chosen for record in row]
    assert len(set(picked)) == 10 and picked != list(range(10))  # not simply the first ten
    assert pick(records[:3], per_class=None, sample=10, seed=7) == [records[:2], records[2:3]]
