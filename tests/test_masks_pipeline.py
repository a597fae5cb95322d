"""Instance masks through whole conversions: a COCO file over the sample photos whose every
annotation has a segmentation (polygons; crowds as RLE counts and strings), converted with
--masks on both runners, read back by the Model Garden's detection decoder with its masks."""

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import BEAM, convert_into, error_rows, version_files, write_manifest
from detection_data import expected_masks, expected_objects, make_coco
from test_masks import assert_on_the_outline

pytestmark = pytest.mark.slow
MASK_KEY = "image/object/mask"


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    return make_coco(tmp_path_factory.mktemp("coco"), masks=True)


def _shards(version: Path, info) -> list[str]:
    return [str(version / s.file) for split in info.splits.values() for s in split.shards]


@pytest.mark.parametrize(
    "flags, turned",
    [
        (("--masks",), {}),
        (
            ("--masks", "--max_side", "64", "--exif_transpose"),
            {"exif_transpose": True, "resized": True},
        ),
    ],
    ids=["as-is", "resized-upright"],
)
def test_the_model_gardens_decoder_reads_every_mask_alike_from_both_runners(
    coco, tmp_path, flags, turned
):
    """tf-models-official 2.20.0's TfExampleDecoder(include_mask=True), as Mask R-CNN's input
    pipeline calls it: one mask a box, the image's size, 0.0 or 1.0, each on its object's
    outline turned and resized as the pixels were."""
    from model_garden import dataloader

    flags = ("--num_shards", "2", *flags)
    local, info = convert_into(coco.instances, tmp_path / "local", *flags)
    beam_version, _ = convert_into(coco.instances, tmp_path / "beam", *flags, *BEAM)
    assert version_files(local) == version_files(beam_version)
    again, _ = convert_into(coco.instances, tmp_path / "again", *flags)
    assert version_files(again) == version_files(local)
    assert info.records == 30 and info.errors == 0
    assert MASK_KEY in info.list_features and info.features[MASK_KEY] == "string"

    decoder = dataloader("tf_example_decoder").TfExampleDecoder(include_mask=True)
    decoded = {}
    for record in tf.data.TFRecordDataset(_shards(local, info)):
        tensors = decoder.decode(record)
        decoded[tensors["source_id"].numpy().decode()] = tensors
    sizes = {key: (int(t["width"]), int(t["height"])) for key, t in decoded.items()}
    expected = expected_masks(coco, sizes, **turned)
    boxes = expected_objects(coco, **turned)
    objects = inside = 0
    for key, tensors in decoded.items():
        got = tensors["groundtruth_instance_masks"].numpy()
        width, height = sizes[key]
        assert got.shape == (len(boxes[key]), height, width)
        assert tensors["image"].shape[:2] == (height, width)
        assert set(np.unique(got)) <= {0.0, 1.0}
        for mask, want in zip(got, expected[key], strict=True):
            inside += assert_on_the_outline(mask.astype(np.uint8), want.pixels, want.edges)
        objects += len(got)
    assert objects > 200 and inside > 50 * objects


def test_masks_cost_their_bytes_only_when_asked(coco, tmp_path):
    boxes, boxes_info = convert_into(coco.instances, tmp_path / "boxes", "--num_shards", "1")
    masked, masked_info = convert_into(
        coco.instances, tmp_path / "masks", "--num_shards", "1", "--masks"
    )
    assert MASK_KEY not in boxes_info.features
    assert masked_info.options["masks"] is True and not boxes_info.options["masks"]
    size = sum(p.stat().st_size for p in boxes.glob("train-*"))
    assert sum(p.stat().st_size for p in masked.glob("train-*")) > size


def test_objects_without_masks_are_bad_annotations_and_jsonl_masksconvert_into(coco, tmp_path):
    images = sorted((coco.instances.parent / "images").glob("*.jpeg"))[:3]
    side = {
        str(p): (e["width"], e["height"])
        for p in images
        for e in coco.document["images"]
        if e["file_name"] == f"images/{p.name}"
    }
    width, height = side[str(images[0])]
    rows = [
        {
            "image_uri": str(images[0]),
            "box_format": "xyxy_normalized",
            "objects": [
                {
                    "bbox": [0, 0, 0.5, 1],
                    "label": "left",
                    "segmentation": [[0, 0, 0.5, 0, 0.5, 1, 0, 1]],
                },
                {
                    "bbox": [0, 0, 1, 1],
                    "label": "all",
                    "is_crowd": 1,
                    "segmentation": {"size": [height, width], "counts": [0, width * height]},
                },
            ],
        },
        {
            "image_uri": str(images[1]),
            "box_format": "xywh",
            "objects": [{"bbox": [1, 1, 5, 5], "label": "left"}],
        },  # no mask
        {
            "image_uri": str(images[2]),
            "box_format": "xywh",  # an RLE of another size
            "objects": [
                {
                    "bbox": [1, 1, 5, 5],
                    "label": "left",
                    "segmentation": {"size": [2, 3], "counts": [6]},
                }
            ],
        },
    ]
    manifest = write_manifest(tmp_path / "m.jsonl", rows)
    version, info = convert_into(manifest, tmp_path / "out", "--masks", "--max_error_rate", "1")
    assert (info.records, info.errors) == (1, 2)
    messages = sorted(row["message"] for row in error_rows(version))
    assert {row["reason"] for row in error_rows(version)} == {"bad_annotation"}
    assert "objects[0]: no segmentation" in messages[1]
    assert "an RLE mask of 3x2 for an image annotated at" in messages[0]
    info_file = json.loads((version / "tfrecord_pipeline.json").read_text())
    spec = {MASK_KEY: tf.io.VarLenFeature(tf.string)}
    assert MASK_KEY in info_file["list_features"]
    (record,) = tf.data.TFRecordDataset(_shards(version, info))
    left, whole = tf.sparse.to_dense(tf.io.parse_single_example(record, spec)[MASK_KEY]).numpy()
    left, whole = tf.io.decode_png(left)[..., 0].numpy(), tf.io.decode_png(whole)[..., 0].numpy()
    assert whole.shape == (height, width) and whole.all()
    assert left[:, : width // 2].all() and not left[:, -(-width // 2) :].any()


def test_tfds_and_load_read_the_same_masks(coco, tmp_path):
    import tensorflow_datasets as tfds

    from tfrecord_pipeline.read.load import load

    version, _ = convert_into(coco.instances, tmp_path / "out", "--num_shards", "1", "--masks")
    ours = load(
        str(version),
        "train",
        batch_size=None,
        image_size=None,
        shuffle_buffer=0,
        with_features=True,
    )
    theirs = tfds.builder_from_directory(str(version)).as_dataset(split="train")

    def masks(examples) -> dict:
        return {e["image/source_id"].numpy(): e[MASK_KEY].numpy().tolist() for e in examples}

    read = masks(ours)
    assert read == masks(theirs) and sum(map(len, read.values())) > 200
