"""Object annotations, pure: parsing JSONL objects and COCO documents, and placing boxes on the
stored image (normalised, clipped, turned with the pixels, degenerate ones dropped)."""

import json
import math
import struct

import pytest

from transforms.errors import Reason, RowError
from transforms.image.detection import Annotation, Frame, row_annotations
from transforms.image.orientation import oriented
from transforms.image.placement import Placement, placed
from transforms.manifest.coco import is_coco_start, read_document


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


def _upright(w, h, orientation=1, applied=None, stored=None):
    applied = orientation if applied is None else applied
    sw, sh = (h, w) if applied in (5, 6, 7, 8) else (w, h)
    return Placement(w, h, orientation, applied, *(stored or (sw, sh)))


def test_pixel_boxes_are_normalised_clipped_and_degenerate_ones_dropped():
    frame = Frame(False)
    boxes = [
        Annotation("a", 10, 20, 60, 120, frame=frame),  # inside
        Annotation("b", -10, 150, 300, 300, frame=frame),  # clipped to the image
        Annotation("c", 250, 0, 260, 50, frame=frame),  # wholly outside: no area left
        Annotation("d", 10, 10, 10, 50, frame=frame),
    ]
    kept, dropped = placed(boxes, _upright(200, 200))
    assert dropped == 2 and [o.label for o in kept] == ["a", "b"]
    assert kept[0][2:6] == (0.05, 0.1, 0.3, 0.6)
    assert kept[1][2:6] == (0.0, 0.75, 1.0, 1.0)
    assert kept[0].area == pytest.approx(50 * 100)  # no area given: the box's, stored pixels


def test_resizing_keeps_normalised_boxes_and_scales_a_given_area():
    frame = Frame(False, 200, 100)
    (item,) = placed(
        [Annotation("a", 20, 10, 120, 60, area=1000.0, frame=frame)],
        Placement(200, 100, 1, 1, 50, 25),
    )[0]
    assert item[2:6] == (0.1, 0.1, 0.6, 0.6)
    assert item.area == pytest.approx(1000 / 16)


# Where the point (0.1, 0.2) of a file's grid lands on the upright image, as Pillow's
# exif_transpose moves pixels (tests/test_detection_images.py checks it with real pixels).
_TURNED = {
    1: (0.1, 0.2),
    2: (0.9, 0.2),
    3: (0.9, 0.8),
    4: (0.1, 0.8),
    5: (0.2, 0.1),
    6: (0.8, 0.1),
    7: (0.8, 0.9),
    8: (0.2, 0.9),
}


@pytest.mark.parametrize("orientation", range(1, 9))
def test_boxes_turn_with_the_pixels(orientation):
    x, y = _TURNED[orientation]
    box = oriented((0.1, 0.2, 0.1, 0.2), orientation)
    assert box == pytest.approx((x, y, x, y))
    if orientation not in (5, 6, 7, 8):
        return  # an upright image of the file's size: the boxes are on the file's grid
    # Boxes drawn on the upright image (told by its swapped size), stored unturned, go back
    # to the file's grid.
    frame = Frame(True, 100, 200)
    upright = Annotation("a", x - 0.05, y - 0.05, x + 0.05, y + 0.05, frame=frame)
    (back,), _ = placed([upright], Placement(200, 100, orientation, 1, 200, 100))
    assert back[2:6] == pytest.approx((0.05, 0.15, 0.15, 0.25))
    # ... and stay as they are when the pixels were turned upright.
    (kept,), _ = placed([upright], _upright(200, 100, orientation))
    assert kept[2:6] == pytest.approx(upright[1:5])


def test_boxes_for_an_image_of_another_size_are_a_bad_annotation():
    item = Annotation("a", 1, 1, 5, 5, frame=Frame(False, 640, 480))
    with pytest.raises(RowError, match="for a 640x480 image; the file is 320x240") as raised:
        placed([item], _upright(320, 240))
    assert raised.value.reason is Reason.BAD_ANNOTATION
    with pytest.raises(RowError):  # swapped sides are only the upright image's when rotated
        placed([item._replace(frame=Frame(False, 240, 320))], _upright(320, 240, 3))


def _coco(images, annotations, categories=({"id": 1, "name": "cat"},)):
    document = {"images": images, "annotations": annotations, "categories": list(categories)}
    return json.dumps(document).encode()


def _image(id_, **more):
    return {"id": id_, "file_name": f"{id_}.jpg", "width": 100, "height": 50, **more}


def _box(id_, image_id, bbox=(10, 10, 20, 20), category=1, **more):
    return {"id": id_, "image_id": image_id, "bbox": list(bbox), "category_id": category, **more}


def test_coco_images_become_rows_keyed_by_their_id_with_their_annotations():
    data = _coco([_image(3), _image(1)], [_box(1, 1), _box(2, 1, iscrowd=1, area=12.5)])
    images, errors = read_document(data, "i.json")
    assert errors == []
    assert [(i.fields["key"], i.fields["image_uri"]) for i in images] == [
        ("3", "3.jpg"),
        ("1", "1.jpg"),
    ]
    assert images[0].annotations == ()  # a negative
    first, second = images[1].annotations
    assert (first.label, first.text, first[1:5]) == ("1", "cat", (10, 10, 30, 30))
    assert first.frame == Frame(False, 100, 50) and not first.is_crowd and first.area is None
    assert second.is_crowd and second.area == 12.5


@pytest.mark.parametrize(
    "annotation, says",
    [
        (_box(1, 1, category=2), "category_id 2 is not in categories"),
        (_box(1, 1, bbox=(1, 2, -1, 4)), "must not be negative"),
        (_box(1, 1, bbox=(1, 2, math.inf, 4)), "must be finite"),
        (_box(1, 1, iscrowd=3), "iscrowd must be 0 or 1"),
        (_box(1, 1, area="big"), "area must be a number"),
    ],
)
def test_a_bad_coco_annotation_makes_its_image_an_error_row(annotation, says):
    images, _ = read_document(_coco([_image(1), _image(2)], [_box(9, 2), annotation]), "i.json")
    assert says in images[0].annotations.message
    assert images[0].annotations.reason is Reason.BAD_ANNOTATION
    assert len(images[1].annotations) == 1


def test_orphan_annotations_repeated_ids_and_broken_files_are_reported():
    images, errors = read_document(_coco([_image(1)], [_box(1, 5), _box(2, 1), _box(2, 1)]), "f")
    assert [(e.source, e.reason.value) for e in errors] == [("f#annotations[0]", "bad_annotation")]
    assert "annotation id 2 is listed twice" in images[0].annotations.message
    twice = [{"id": 1, "name": "cat"}, {"id": 1, "name": "dog"}]
    for data, says in [
        (_coco([_image(1)], [], twice), "category id 1 is listed twice"),
        (b'{"images": [], "annotations": []}', "categories must be a list"),
        (b"[1, 2]", "not an object"),
        (b'{"images": ', "not JSON"),
        (_coco([_image(1)], []).replace(b'"cat"', b'"cat\\udc00"'), "half a surrogate pair"),
    ]:
        images, (error,) = read_document(data, "f")
        assert images == [] and error.source == "f" and says in error.message


@pytest.mark.parametrize(
    "start, coco",
    [
        ('{"images": [], "annotations": [], "categories": []}\n', True),  # whole, one line
        ('{"info": {"year": 2017}, "images": [{"id": 1, "file_na', True),  # cut at the start
        ('{\n  "images": [\n', True),  # pretty-printed
        ('\ufeff {"licenses": [', True),
        ('{"image_uri": "a.jpg", "label": "cat"}\n{"image_uri": "b.jpg"', False),
        ('{"image_uri": "a.jpg", "objects": []}\n', False),
        ('{"images": "a.jpg", "label": "x"}\n', False),  # a row whose column is called images
        ('{"image_uri": "a.jpg", "lab', False),  # a JSONL row cut short: its own bad row
    ],
)
def test_a_json_manifest_is_coco_by_its_start(start, coco):
    assert is_coco_start(start.removeprefix("\ufeff")) is coco


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def test_a_box_that_float32_cannot_tell_from_a_line_is_dropped_not_stored():
    # 1e-12 pixels wide: distinct in float64, one value once the record stores it as float32.
    tiny = Annotation("a", 1.0, 1.0, 1.0 + 1e-12, 1.0 + 1e-12, frame=Frame(False))
    kept, dropped = placed([tiny], Placement(149, 139, 1, 1, 149, 139))
    assert dropped == 1, [(_float32(o.xmin), _float32(o.xmax)) for o in kept]
