"""Detection, multi-label and preset inputs as a hostile user writes them: each test names what
must hold where an earlier build did not."""

import json
import random
from pathlib import Path

import pytest
from conftest import BEAM, crop, encode, error_rows, photo, write_manifest
from detection_data import make_coco

from tfrecord_pipeline.dataset.metadata import INFO_FILE, DatasetInfo
from tfrecord_pipeline.read.preview import preview
from tfrecord_pipeline.read.reader import examples
from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.errors import UserError

PHOTO = photo()


@pytest.fixture(scope="module")
def coco_dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    coco = make_coco(root, images=8, boxes_per_image=3)
    output = root / "out"
    run(["--manifest", str(coco.instances), "--output", str(output), "--no_progress"])
    return output


def test_preview_of_a_detection_dataset_shows_its_images_by_object_class(coco_dataset, tmp_path):
    shown = preview(str(coco_dataset), "train", str(tmp_path / "grid.png"), 2, None)
    assert shown > 0


def _coco(path, image_id: int, image: str, category: dict):
    document = {
        "images": [{"id": image_id, "file_name": image}],
        "annotations": [
            {"id": 1, "image_id": image_id, "category_id": category["id"], "bbox": [1, 1, 20, 20]}
        ],
        "categories": [category],
    }
    path.write_text(json.dumps(document))
    return path


def _object_labels(version) -> dict[str, tuple[list[int], list[str]]]:
    """Each record's (object label ids, texts) by key, read without TensorFlow."""
    info = DatasetInfo.from_json((version / INFO_FILE).read_text())
    return {
        example["image/source_id"].decode(): (
            example["image/object/class/label"],
            [text.decode() for text in example["image/object/class/text"]],
        )
        for example in examples(str(version), info, "train")
    }


def test_a_coco_category_id_is_kept_beside_a_jsonl_manifest_with_label_names(tmp_path):
    photo = tmp_path / "a.jpg"
    photo.write_bytes(encode(crop(PHOTO, random.Random(1))))
    instances = _coco(tmp_path / "instances.json", 7, "a.jpg", {"id": 1, "name": "person"})
    named = write_manifest(
        tmp_path / "more.jsonl",
        [
            {
                "image_uri": "a.jpg",
                "key": "b",
                "box_format": "xywh",
                "objects": [{"bbox": [1, 1, 5, 5], "label": "cup"}],
            }
        ],
    )
    argv = ["--manifest", str(instances), str(named), "--output", str(tmp_path / "out")]
    try:
        converted = run([*argv, "--no_progress"])
    except UserError:
        return  # refusing the mix is as good as keeping the id
    assert _object_labels(Path(converted.folder))["7"] == ([1], ["person"])


@pytest.mark.parametrize("runner", [[], BEAM])
def test_one_category_id_named_two_ways_in_two_coco_files_is_not_converted(tmp_path, runner):
    photo = tmp_path / "a.jpg"
    photo.write_bytes(encode(crop(PHOTO, random.Random(1))))
    first = _coco(tmp_path / "a.json", 1, "a.jpg", {"id": 1, "name": "person"})
    second = _coco(tmp_path / "b.json", 2, "a.jpg", {"id": 1, "name": "dog"})
    argv = ["--manifest", str(second), str(first), "--output", str(tmp_path / "out")]
    converted = run([*argv, "--no_progress", "--max_error_rate", "1", *runner])
    labels = _object_labels(Path(converted.folder))
    assert labels == {"2": ([1], ["dog"])}  # the first manifest's name; the other image is an error
    (error,) = error_rows(Path(converted.folder))
    assert (
        error["reason"] == "bad_annotation"
        and "'person' here, 'dog' in manifest 1" in error["message"]
    )


def test_the_tpu_imagenet_preset_refuses_multi_label(tmp_path):
    # The reference readers parse image/class/label as one int64: a list fails them.
    argv = ["--manifest", str(tmp_path / "tags.jsonl"), "--output", str(tmp_path / "out")]
    with pytest.raises(UserError, match="one label an image"):
        run([*argv, "--multi_label", "--preset", "tpu-imagenet"])


@pytest.mark.parametrize("flags", [["--multi_label"], ["--preset", "tpu-imagenet"]])
def test_a_detection_dataset_refuses_classification_only_flags(coco_dataset, tmp_path, flags):
    instances = coco_dataset.parent / "instances.json"
    argv = ["--manifest", str(instances), "--output", str(tmp_path / "out"), "--no_progress"]
    with pytest.raises(UserError):
        run([*argv, "--num_shards", "1", *flags])
