"""COCO documents read into rows: images keyed by their id with their annotations, bad
annotations, orphans and broken files reported, and a JSON manifest told to be COCO by its start."""

import json
import math

import pytest

from tfrecord_pipeline.transforms.errors import Reason
from tfrecord_pipeline.transforms.image.detection import Frame
from tfrecord_pipeline.transforms.manifest.coco import is_coco_start, read_document


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
