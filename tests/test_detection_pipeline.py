"""Detection records through the converter: the shard writer called directly, the read step in
a TestPipeline, and whole conversions of a COCO file over the sample photos (a few hundred
boxes) on both runners, read back with TensorFlow's parser."""

import json
import shutil
from pathlib import Path

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from conftest import BEAM, convert_into, error_rows, version_files, write_manifest
from detection_data import NEGATIVES, expected_objects, make_coco

from tfrecord_pipeline.read.load import parsing_spec
from tfrecord_pipeline.transforms.beam.manifests import ReadManifests
from tfrecord_pipeline.transforms.manifest.labels import label_map_from_labels
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig, row_labels
from tfrecord_pipeline.transforms.manifest.sources import (
    check_manifests,
    detection_config,
    read_all,
)
from tfrecord_pipeline.transforms.plan.sharding import ShardId
from tfrecord_pipeline.transforms.tfrecord.examples import OBJECT_FEATURES
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig, write_shard

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    return make_coco(tmp_path_factory.mktemp("coco"))


def _records(version: Path, info) -> dict[str, dict]:
    """Every record of a version, parsed with the spec its metadata publishes, by key."""
    spec = parsing_spec(tf, json.loads((version / "tfrecord_pipeline.json").read_text()))
    files = [str(version / s.file) for split in info.splits.values() for s in split.shards]
    parsed = {}
    for record in tf.data.TFRecordDataset(files):
        example = tf.io.parse_single_example(record, spec)
        parsed[example["image/source_id"].numpy().decode()] = example
    return parsed


def _check_objects(example, expected) -> None:
    """The record's objects are the expected ones, in order, boxes to 1e-6."""
    got = {key: example[key].numpy() for key, _ in OBJECT_FEATURES}
    assert list(got["image/object/class/label"]) == [e.category_id for e in expected]
    assert [t.decode() for t in got["image/object/class/text"]] == [e.name for e in expected]
    assert list(got["image/object/is_crowd"]) == [e.is_crowd for e in expected]
    pixels = int(example["image/height"]) * int(example["image/width"])
    for index, item in enumerate(expected):
        box = [got[f"image/object/bbox/{side}"][index] for side in ("xmin", "ymin", "xmax", "ymax")]
        assert box == pytest.approx(item.box, abs=1e-6)
        x0, y0, x1, y1 = item.box
        area = item.area_fraction if item.area_fraction is not None else (x1 - x0) * (y1 - y0)
        assert got["image/object/area"][index] == pytest.approx(area * pixels, rel=1e-5)


def test_the_writer_stores_each_images_boxes(coco, tmp_path):
    config = ReadConfig()
    manifests = check_manifests([str(coco.instances)], config)
    config = detection_config(manifests, config)
    rows = list(read_all(manifests[0], config))
    labels = label_map_from_labels(label for row in rows for label in row_labels(row))
    assert labels.integers and labels.names == ("1", "3", "17", "18", "44", "47", "90")
    *errors, result = write_shard(ShardId("train", 0, 1), rows, labels, WriteConfig(str(tmp_path)))
    assert errors == [] and result.records == len(rows) == 30
    expected = expected_objects(coco)
    kept = sum(map(len, expected.values()))
    assert result.boxes_dropped == len(coco.document["annotations"]) - kept > 0
    spec = {key: tf.io.RaggedFeature(tf.as_dtype(dtype)) for key, dtype in OBJECT_FEATURES}
    spec.update(
        {
            k: tf.io.FixedLenFeature([], t)
            for k, t in (
                ("image/source_id", tf.string),
                ("image/height", tf.int64),
                ("image/width", tf.int64),
            )
        }
    )
    for record in tf.data.TFRecordDataset(str(tmp_path / result.staged)):
        example = tf.io.parse_single_example(record, spec)
        _check_objects(example, expected[example["image/source_id"].numpy().decode()])


def test_the_read_step_gives_coco_rows_negatives_and_orphans(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"")
    document = {
        "images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}],
        "annotations": [
            {"id": 1, "image_id": 1, "bbox": [1, 1, 2, 2], "category_id": 5},
            {"id": 2, "image_id": 9, "bbox": [1, 1, 2, 2], "category_id": 5},
        ],
        "categories": [{"id": 5, "name": "five"}],
    }
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(document, indent=2))
    config = ReadConfig(drop_negatives=True)
    manifests = check_manifests([str(path)], config)
    config = detection_config(manifests, config)
    with BeamTestPipeline() as p:
        read = p | ReadManifests(manifests, config)
        keys = read["rows"] | beam.FlatMap(lambda batch: [row.key for row in batch.rows])
        assert_that(keys, equal_to(["1"]))
        negatives = read["negatives"] | "Negative" >> beam.Map(lambda n: n.source)
        assert_that(negatives, equal_to([f"{path}#images[1]"]), label="Negatives")
        orphans = read["errors"] | beam.Map(lambda e: (e.source, e.reason.value))
        assert_that(
            orphans, equal_to([(f"{path}#annotations[1]", "bad_annotation")]), label="Orphans"
        )


@pytest.mark.parametrize(
    "flags, turned",
    [
        ((), {}),
        (("--max_side", "64", "--exif_transpose"), {"exif_transpose": True, "resized": True}),
    ],
    ids=["as-is", "resized-upright"],
)
def test_a_coco_file_converts_alike_on_both_runners_with_its_boxes(coco, tmp_path, flags, turned):
    flags = ("--num_shards", "3", "--split", "train=0.7,validation=0.3", *flags)
    local, info = convert_into(coco.instances, tmp_path / "local", *flags)
    beam_version, beam_info = convert_into(coco.instances, tmp_path / "beam", *flags, *BEAM)
    assert version_files(local) == version_files(beam_version)  # the same bytes, every file
    again, _ = convert_into(coco.instances, tmp_path / "again", *flags)
    assert version_files(again) == version_files(local)
    assert info.records == 30 and info.errors == 0 and not info.failures
    assert info.boxes_dropped == sum(s.boxes_dropped for s in info.splits.values()) > 0
    assert sorted(info.list_features) == sorted(key for key, _ in OBJECT_FEATURES)
    assert "image/class/label" not in info.features
    assert info.labels["kind"] == "integers"
    records = _records(local, info)
    expected = expected_objects(coco, **turned)
    assert sorted(records) == sorted(expected)
    boxes = 0
    for key, example in records.items():
        _check_objects(example, expected[key])
        boxes += len(expected[key])
        image = tf.io.decode_jpeg(example["image/encoded"])
        assert image.shape[:2] == (example["image/height"], example["image/width"])
    assert boxes > 200
    assert all(not expected[str(1000 + 7 * i)] for i in NEGATIVES)


def test_jsonl_objects_bad_annotations_and_dropped_negatives(coco, tmp_path):
    images = coco.instances.parent / "images"
    shutil.copytree(images, tmp_path / "images")
    names = sorted(p.name for p in images.iterdir() if p.suffix == ".jpeg")[:4]
    rows = [
        {
            "image_uri": f"images/{names[0]}",
            "box_format": "xyxy_normalized",
            "objects": [{"bbox": [0.1, 0.2, 0.5, 0.6], "label": "cat"}],
        },
        {"image_uri": f"images/{names[1]}", "objects": []},  # a negative: dropped
        {
            "image_uri": f"images/{names[2]}",
            "box_format": "xywh",
            "objects": [{"bbox": [1, 2, 3], "label": "dog"}],
        },  # malformed
        {
            "image_uri": f"images/{names[3]}",
            "box_format": "xywh",
            "width": 5,
            "height": 5,
            "objects": [{"bbox": [1, 2, 3, 4], "label": "dog", "is_crowd": 1}],
        },  # other size
    ]
    manifest = write_manifest(tmp_path / "m.jsonl", rows)
    version, info = convert_into(
        manifest, tmp_path / "out", "--drop_negatives", "--max_error_rate", "1"
    )
    assert (info.rows_in, info.records, info.errors, info.negatives_dropped) == (3, 1, 2, 1)
    assert {row["reason"] for row in error_rows(version)} == {"bad_annotation"}
    (example,) = _records(version, info).values()
    assert [example[f"image/object/bbox/{s}"].numpy()[0] for s in ("xmin", "ymin")] == (
        pytest.approx([0.1, 0.2])
    )
    assert (version / "labels.txt").read_text() == "cat\ndog\n"
    assert example["image/object/class/label"].numpy().tolist() == [0]


def test_load_gives_images_with_their_boxes_batched_ragged(coco, tmp_path):
    from tfrecord_pipeline import load

    version, info = convert_into(coco.instances, tmp_path / "out", "--num_shards", "1")
    dataset = load(str(version), "train", batch_size=4, image_size=(32, 48), shuffle_buffer=0)
    expected = expected_objects(coco)
    order = list(_records(version, info))  # the records in file order, as read unshuffled
    seen = 0
    for images, objects in dataset:
        assert images.shape == (4, 32, 48, 3)
        for index in range(4):
            key = order[seen + index]
            boxes = objects["boxes"][index].numpy()
            want = [(y0, x0, y1, x1) for x0, y0, x1, y1 in (e.box for e in expected[key])]
            np.testing.assert_allclose(boxes.reshape(-1, 4), np.reshape(want, (-1, 4)), atol=1e-6)
            classes = objects["classes"][index].numpy().tolist()
            assert classes == [e.category_id for e in expected[key]]
        seen += 4
    assert seen == 28  # 30 records, the last partial batch dropped


def test_a_refresh_converts_again_the_images_whose_annotations_changed(coco, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(coco.instances.parent, root)
    manifest = root / "instances.json"
    convert_into(manifest, tmp_path / "out", "--num_shards", "2")
    document = json.loads(manifest.read_text())
    moved = document["annotations"][0]
    moved["bbox"] = [1.0, 2.0, 3.0, 4.0]
    manifest.write_text(json.dumps(document))
    refreshed, info = convert_into(manifest, tmp_path / "out", "--num_shards", "2", "--incremental")
    full, full_info = convert_into(manifest, tmp_path / "full", "--num_shards", "2")
    assert info.records == full_info.records == 30
    assert info.boxes_dropped <= full_info.boxes_dropped  # carried records' drops are not recounted
    records, expected = _records(refreshed, info), _records(full, full_info)
    assert sorted(records) == sorted(expected)
    for key, example in records.items():
        for name in ("image/object/bbox/xmin", "image/object/bbox/ymax", "image/encoded"):
            assert np.array_equal(example[name].numpy(), expected[key][name].numpy()), key


@pytest.mark.parametrize("flags, turned", [((), {}), (("--max_side", "64"), {"resized": True})])
def test_the_model_gardens_detection_decoder_reads_every_record(coco, tmp_path, flags, turned):
    """tf-models-official 2.20.0's TfExampleDecoder, as the RetinaNet and Mask R-CNN input
    pipelines call it, on every record: boxes (ymin, xmin, ymax, xmax) to 1e-6."""
    from model_garden import dataloader

    decoder = dataloader("tf_example_decoder").TfExampleDecoder()
    version, info = convert_into(coco.instances, tmp_path / "out", "--num_shards", "2", *flags)
    expected = expected_objects(coco, **turned)
    files = [str(version / s.file) for split in info.splits.values() for s in split.shards]
    decoded = 0
    for record in tf.data.TFRecordDataset(files):
        tensors = decoder.decode(record)
        want = expected[tensors["source_id"].numpy().decode()]
        boxes = [(y0, x0, y1, x1) for x0, y0, x1, y1 in (item.box for item in want)]
        got = tensors["groundtruth_boxes"].numpy()
        np.testing.assert_allclose(got.reshape(-1, 4), np.reshape(boxes, (-1, 4)), atol=1e-6)
        classes = tensors["groundtruth_classes"].numpy().tolist()
        assert classes == [item.category_id for item in want]
        crowds = tensors["groundtruth_is_crowd"].numpy().tolist()
        assert crowds == [bool(item.is_crowd) for item in want]
        assert tensors["image"].shape[:2] == (tensors["height"], tensors["width"])
        assert len(tensors["groundtruth_area"].numpy()) == len(want)
        decoded += 1
    assert decoded == 30
