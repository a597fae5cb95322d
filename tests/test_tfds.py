"""TensorFlow Datasets and the TPU reference reader on converted folders, as they are; TFDS's
builder of a dataset root's published version, by `tfds_builder(root)` and by `tfds.load`."""

import dataclasses
import json
import pickle
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from conftest import make_images, write_manifest

import tfrecord_pipeline
import tfrecord_pipeline.tfds  # registers the builder tfds.load finds by name
from tfrecord_pipeline import load
from tfrecord_pipeline.dataset.labels_file import label_names
from tfrecord_pipeline.dataset.metadata import INFO_FILE, LABELS_FILE
from tfrecord_pipeline.dataset.rollback import rollback
from tfrecord_pipeline.dataset.tfds_metadata import NAME, class_names, labels_file, tfds_files
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.tfrecord.examples import RAW_KEY

pytestmark = pytest.mark.slow
IMAGE_KEYS = ("image/encoded", RAW_KEY)
EXTRAS = ("--feature", "weight:float", "--feature", "box:int64", "--feature", "note:bytes")


def _convert(tmp_path: Path, rows: list[dict], *flags: str, name="out") -> tuple[Path, object]:
    manifest = write_manifest(tmp_path / "m.jsonl", rows)
    output = tmp_path / name
    splits = ("--split", "train=0.75,validation=0.25", "--num_shards", "2")
    converted = run(
        ["--manifest", str(manifest), "--output", str(output), "--no_progress", *splits, *flags]
    )
    return Path(converted.folder), converted.info


def _pixels(example: dict) -> np.ndarray:
    """A TFDS example's image: decoded by TFDS, or raw bytes given their stored shape."""
    if RAW_KEY in example:
        shape = (example["image/height"], example["image/width"], example["image/channels"])
        return np.frombuffer(example[RAW_KEY], np.uint8).reshape(shape)
    return example["image/encoded"]


def _by_key(examples, pixels) -> dict[str, tuple[dict, np.ndarray]]:
    """source_id → (every scalar feature, decoded pixels)."""
    return {
        example["image/source_id"].decode(): (
            {k: v for k, v in example.items() if k not in (*IMAGE_KEYS, "image")},
            pixels(example),
        )
        for example in examples
    }


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "kind, flags",
    [
        ("names", ()),
        ("names", ("--label_offset", "1", "--channels", "1")),
        ("names", ("--image_encoding", "raw")),
        ("integers", EXTRAS),
    ],
)
def test_tfds_reads_every_split_as_our_reader_does(tmp_path, kind, flags):
    rows = make_images(tmp_path, per_class=4)
    if kind == "integers":
        for index, row in enumerate(rows):
            row.update(label=index % 3 + 5, weight=index / 2, box=index, note=f"n{index}")
    output, info = _convert(tmp_path, rows, *flags)
    before = _files(output)
    builder = tfds.builder_from_directory(str(output))
    assert sorted(builder.info.splits) == sorted(info.splits) == ["train", "validation"]
    for name, split in info.splits.items():
        assert builder.info.splits[name].num_examples == split.examples
        assert builder.info.splits[name].shard_lengths == [s.records for s in split.shards]
        ours = load(
            str(output),
            name,
            batch_size=None,
            image_size=None,
            shuffle_buffer=0,
            with_features=True,
        )
        expected = _by_key(tfds.as_numpy(ours), lambda example: example["image"])
        theirs = _by_key(tfds.as_numpy(builder.as_dataset(split=name)), _pixels)
        assert {(k, v[0]["image/class/label"]) for k, v in theirs.items()} == {
            (k, v[0]["image/class/label"]) for k, v in expected.items()
        }
        for key, (features, pixels) in theirs.items():
            assert features == expected[key][0]  # every scalar, extra --features too
            shape = (features["image/height"], features["image/width"], features["image/channels"])
            assert pixels.shape == shape and np.array_equal(pixels, expected[key][1])
    label = builder.info.features["image/class/label"]
    if kind == "names":
        offset = ["(no label 0)"] if "--label_offset" in flags else []
        assert label.names == offset + (output / "labels.txt").read_text().split()
    else:
        assert not isinstance(label, tfds.features.ClassLabel) and label.dtype == np.int64
    image, label = next(iter(builder.as_dataset(split="train", as_supervised=True)))
    assert label.dtype == tf.int64 and image.dtype == (tf.string if "raw" in flags else tf.uint8)
    assert _files(output) == before  # TFDS wrote nothing into the dataset
    assert verify(str(output)) == (info.records, [])


def test_index_files_stay_out_of_the_shard_glob_the_tpu_reference_reader_uses(tmp_path):
    output, info = _convert(tmp_path, make_images(tmp_path, per_class=4), "--write_index")
    keys_to_features = {  # as tensorflow/tpu's resnet imagenet_input.py parses a record
        "image/encoded": tf.io.FixedLenFeature((), tf.string, ""),
        "image/format": tf.io.FixedLenFeature((), tf.string, "jpeg"),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64, -1),
        "image/class/text": tf.io.FixedLenFeature([], tf.string, ""),
        "image/object/bbox/xmin": tf.io.VarLenFeature(dtype=tf.float32),
        "image/object/class/label": tf.io.VarLenFeature(dtype=tf.int64),
    }
    for name, split in info.splits.items():
        shards = [str(output / shard.file) for shard in split.shards]
        assert sorted(tf.io.gfile.glob(f"{output}/{name}-*")) == shards
        for shard in split.shards:
            assert shard.index == f"index/{shard.file}.idx" and (output / shard.index).is_file()
        files = tf.data.Dataset.list_files(f"{output}/{name}-*", shuffle=False)
        records = files.interleave(
            lambda path: tf.data.TFRecordDataset(path, buffer_size=8 << 20), cycle_length=2
        )
        labels: Counter = Counter()
        for record in records:
            parsed = tf.io.parse_single_example(record, keys_to_features)
            image = tf.image.decode_image(tf.reshape(parsed["image/encoded"], shape=[]), 3)
            assert image.shape[-1] == 3
            labels[str(int(parsed["image/class/label"]))] += 1
        assert labels == split.label_counts  # every record, each once
    assert tfds.builder_from_directory(str(output)).info.splits["train"].num_examples > 0
    assert verify(str(output)) == (info.records, [])


def test_tfds_files_are_checked_by_verify_and_left_out_for_gzip(tmp_path):
    rows = make_images(tmp_path, per_class=2)
    output, info = _convert(tmp_path, rows)
    tfds_info = json.loads((output / "dataset_info.json").read_text())
    tfds_info["splits"][0]["shardLengths"][0] = "1000"
    (output / "dataset_info.json").write_text(json.dumps(tfds_info))
    problems = verify(str(output))[1]
    assert problems == [f"dataset_info.json: differs from what {INFO_FILE} describes"]
    gzip, info = _convert(tmp_path, rows, "--compression", "gzip", name="gzip")
    assert not {"dataset_info.json", "features.json", labels_file("image/class/label")} & set(
        _files(gzip)
    )
    assert verify(str(gzip)) == (info.records, [])


def test_what_tfds_cannot_name_or_read(tmp_path):
    """ClassLabel names every id from 0, each once; TFDS refuses a split name with no letter or
    digit, and takes `all` for every split."""
    rows = make_images(tmp_path, per_class=1)
    rows[0]["label"] = "(no label 0)"
    output, info = _convert(tmp_path, rows, "--label_offset", "2")
    names = class_names(info, label_names(str(output), info))
    assert names[:2] == ["(no label 0)_", "(no label 1)"] and len(set(names)) == len(names)
    builder = tfds.builder_from_directory(str(output))
    assert builder.info.features["image/class/label"].names == names
    for odd in ("_", "all"):
        odd_splits = dataclasses.replace(info, splits={odd: info.splits["train"]})
        assert tfds_files(odd_splits, names) == {}


def test_a_detection_dataset_reads_with_its_objects_and_named_classes(tmp_path):
    rows = make_images(tmp_path, per_class=2)
    for number, row in enumerate(rows):
        row["box_format"] = "xyxy_normalized"
        row["objects"] = [{"bbox": [0.1, 0.2, 0.5, 0.6], "label": row.pop("label")}] * (number % 3)
    folder, _ = _convert(tmp_path, rows)
    builder = tfds.builder_from_directory(str(folder))
    names = (folder / LABELS_FILE).read_text().splitlines()
    labels = builder.info.features["image/object/class/label"].feature
    assert isinstance(labels, tfds.features.ClassLabel) and labels.names == names
    assert builder.info.supervised_keys is None  # a record has objects, not one label
    ours = load(
        str(folder), "train", batch_size=None, image_size=None, shuffle_buffer=0, with_features=True
    )
    keys = ("image/object/bbox/ymin", "image/object/class/label", "image/object/area")

    def objects(examples) -> dict:
        return {
            e["image/source_id"].numpy(): [e[k].numpy().tolist() for k in keys] for e in examples
        }

    theirs = objects(builder.as_dataset(split="train"))
    assert objects(ours) == theirs and any(labels for _, labels, _ in theirs.values())


def _source_ids(dataset) -> list[bytes]:
    return sorted(example["image/source_id"] for example in tfds.as_numpy(dataset))


def test_tfds_builder_and_tfds_load_read_the_version_latest_names(tmp_path):
    """`tfds_builder(root)` and `tfds.load("tfrecord_pipeline", data_dir=root)` read the
    published version, a rollback's too, and change no version."""
    rows = make_images(tmp_path, per_class=4)
    first, _ = _convert(tmp_path, rows[:10])
    second, info = _convert(tmp_path, rows)
    root = str(second.parents[1])
    before = [_files(first), _files(second)]  # TFDS writes nothing into a version
    builder = tfrecord_pipeline.tfds_builder(root)
    assert Path(builder.data_dir) == second
    assert builder.info.splits["train"].num_examples == info.splits["train"].examples
    ours = load(root, "train", batch_size=None, image_size=None, shuffle_buffer=0)
    assert len(_source_ids(builder.as_dataset(split="train"))) == len(list(ours))
    by_name = tfds.load(NAME, data_dir=root, split="validation")
    assert _source_ids(by_name) == _source_ids(builder.as_dataset(split="validation"))
    image, label = next(iter(tfds.load(NAME, data_dir=root, split="train", as_supervised=True)))
    assert (image.dtype, label.dtype) == (tf.uint8, tf.int64)
    rollback(root, first.name)
    assert Path(tfrecord_pipeline.tfds_builder(root).data_dir) == first
    again = tfds.load(f"{NAME}:1.0.0", data_dir=root, split="train")
    assert _source_ids(again) == _source_ids(
        tfds.builder_from_directory(str(first)).as_dataset(split="train")
    )
    assert Path(pickle.loads(pickle.dumps(builder)).data_dir) == second  # the version it read
    assert [_files(first), _files(second)] == before


def test_what_tfds_builder_and_tfds_load_refuse_in_one_line(tmp_path):
    rows = make_images(tmp_path, per_class=1)
    gzip, _ = _convert(tmp_path, rows, "--compression", "gzip", name="gzip")
    refusals = {
        lambda: tfrecord_pipeline.tfds_builder(str(gzip.parents[1])): (
            f"{gzip} has no TFDS metadata: TFDS reads uncompressed shards only"
        ),
        lambda: tfrecord_pipeline.tfds_builder(str(tmp_path)): "holds no published dataset",
        lambda: tfds.load(NAME, split="train"): f'tfds.load("{NAME}") needs data_dir=',
        lambda: tfds.load(f"{NAME}:2.0.0", data_dir=str(gzip), split="train"): (
            "a converted dataset has no TFDS configs and one version, 1.0.0"
        ),
    }
    for call, words in refusals.items():
        with pytest.raises(ValueError, match=re.escape(words)) as raised:
            call()
        assert "\n" not in str(raised.value)
