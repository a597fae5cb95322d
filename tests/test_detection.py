"""Object annotations, pure: a JSONL row's objects parsed in each box format, and malformed
ones refused as bad annotations (COCO documents: test_coco.py; boxes placed: test_placement.py)."""

import pytest

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image.detection import row_annotations


def _objects(*objects, **row):
    return row_annotations({"objects": list(objects), **row}, str)


def test_jsonl_objects_in_each_box_format_give_the_same_corners():
    pixels = [
        (_objects({"bbox": box, "label": "cat"}, box_format=fmt)[0][1:5], fmt)
        for box, fmt in (([10, 20, 30, 40], "xywh"), ([10, 20, 40, 60], "xyxy"))
    ]
    assert [corners for corners, _ in pixels] == [(10, 20, 40, 60)] * 2
    (item,) = _objects({"bbox": [0.1, 0.2, 0.3, 0.4], "label": 7}, box_format="xywh_normalized")
    assert item.frame.normalized and item.label == "7"
    assert item[1:5] == pytest.approx((0.1, 0.2, 0.4, 0.6))


def test_an_image_without_objects_is_a_negative_and_needs_no_box_format():
    assert _objects() == ()


@pytest.mark.parametrize(
    "objects, row, says",
    [
        ([{"bbox": [1, 2, 3, 4], "label": "a"}], {}, "box_format must be one of"),
        ([{"bbox": [1, 2, 3], "label": "a"}], {}, "a list of 4 numbers"),
        ([{"bbox": [1, 2, "3", 4], "label": "a"}], {}, "must be a number"),
        ([{"bbox": [1, 2, True, 4], "label": "a"}], {}, "must be a number"),
        ([{"bbox": [1, 2, float("nan"), 4], "label": "a"}], {}, "must be finite"),
        ([{"bbox": [1, 2, float("inf"), 4], "label": "a"}], {}, "must be finite"),
        ([{"bbox": [1, 2, -3, 4], "label": "a"}], {}, "must not be negative"),
        ([{"bbox": [1, 2, 3, 4], "label": 1.5}], {}, "label must be text or an integer"),
        ([{"bbox": [1, 2, 3, 4], "label": None}], {}, "label must be text or an integer"),
        ([{"bbox": [1, 2, 3, 4], "label": [1]}], {}, "label must be text or an integer"),
        ([{"bbox": [1, 2, 3, 4], "label": "a", "is_crowd": 2}], {}, "is_crowd must be 0 or 1"),
        ([{"bbox": [1, 2, 3, 4], "label": "a", "area": -1}], {}, "area must not be negative"),
        (["box"], {}, "objects[0] must be an object"),
        ([{"bbox": [1, 2, 3, 4], "label": "a"}], {"width": 10}, "give both or neither"),
        ([{"bbox": [1, 2, 3, 4], "label": "a"}], {"width": 0, "height": 5}, "positive integer"),
    ],
)
def test_malformed_objects_are_bad_annotations(objects, row, says):
    fields = {"box_format": "xywh", **row}
    if objects and "box_format must" in says:
        del fields["box_format"]
    with pytest.raises(RowError) as raised:
        _objects(*objects, **fields)
    assert raised.value.reason is Reason.BAD_ANNOTATION and says in raised.value.message


def test_xyxy_boxes_must_not_be_inverted_and_objects_must_be_a_list():
    with pytest.raises(RowError, match="must not be below"):
        _objects({"bbox": [5, 5, 4, 6], "label": "a"}, box_format="xyxy")
    with pytest.raises(RowError, match="objects must be a list"):
        row_annotations({"objects": {"bbox": []}}, str)
