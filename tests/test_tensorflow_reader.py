"""The real reader: tf.data + tf.io.parse_single_example + tf.io.decode_jpeg on converted shards."""

import csv
import io
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_images, write_manifest
from PIL import Image

from tfrecord_pipeline.transforms.image.config import StoredImage
from tfrecord_pipeline.transforms.tfrecord.examples import build_example, label_features
from tfrecord_pipeline.transforms.tfrecord.records import frame

pytestmark = pytest.mark.slow
SAMPLE = Path(__file__).resolve().parents[1] / "sample"
_DTYPES = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}


def parse_spec(info):
    """The parsing spec a user builds from tfrecord_pipeline.json."""
    return {key: tf.io.FixedLenFeature([], _DTYPES[dtype]) for key, dtype in info.features.items()}


def read_all(output: Path, info, split: str):
    files = [str(output / shard.file) for shard in info.splits[split].shards]
    compression = "GZIP" if info.compression == "gzip" else ""
    dataset = tf.data.TFRecordDataset(files, compression_type=compression)
    return [tf.io.parse_single_example(record, parse_spec(info)) for record in dataset]


def test_every_record_of_the_sample_decodes_with_true_labels_and_pixels(convert):
    output, info = convert(
        SAMPLE / "manifest.csv", "--num_shards", "2", "--split", "train=0.8,validation=0.2"
    )
    with open(SAMPLE / "manifest.csv") as handle:
        sources = {row["image_uri"]: row["label"] for row in csv.DictReader(handle)}
    names = (output / "labels.txt").read_text().split()
    seen = {}
    for split in info.splits:
        for example in read_all(output, info, split):
            key = example["image/source_id"].numpy().decode()
            label = example["image/class/label"].numpy()
            assert names[label] == sources[key] == example["image/class/text"].numpy().decode()
            pixels = tf.io.decode_jpeg(example["image/encoded"]).numpy()
            assert pixels.shape == (
                example["image/height"],
                example["image/width"],
                example["image/channels"],
            )
            stored = example["image/encoded"].numpy()
            source_bytes = (SAMPLE / key).read_bytes()
            source = np.asarray(Image.open(io.BytesIO(source_bytes)).convert("RGB"), np.float32)
            if Image.open(io.BytesIO(source_bytes)).mode == "RGB" and key.endswith(".jpg"):
                assert stored == source_bytes  # pass-through: not one byte changed
            # TF and Pillow decode the same JPEG about 3 levels apart (IDCT, upsampling).
            assert np.abs(pixels.astype(np.float32) - source).mean() < 4.0
            seen[key] = split
    assert len(seen) == len(sources) == info.records


def test_integer_labels_extra_features_and_gzip(tmp_path, convert):
    rows = make_images(tmp_path, per_class=2)
    for index, row in enumerate(rows):
        row.update(label=str(index % 3 + 5), weight=str(index / 2), box=index, note=f"n{index}")
    manifest = write_manifest(tmp_path / "m.jsonl", rows)
    flags = ("--feature", "weight:float", "--feature", "box:int64", "--feature", "note:bytes")
    output, info = convert(manifest, *flags, "--compression", "gzip", "--num_shards", "2")
    assert info.labels["kind"] == "integers" and not (output / "labels.txt").read_text()
    assert all(shard.file.endswith(".tfrecord.gz") for shard in info.splits["train"].shards)
    examples = read_all(output, info, "train")
    assert len(examples) == len(rows)
    by_key = {e["image/source_id"].numpy().decode(): e for e in examples}
    for index, row in enumerate(rows):
        example = by_key[row["image_uri"]]
        assert example["image/class/label"].numpy() == index % 3 + 5
        assert example["image/class/text"].numpy().decode() == row["label"]
        assert example["weight"].numpy() == pytest.approx(index / 2)
        assert example["box"].numpy() == index and example["note"].numpy() == f"n{index}".encode()


def test_our_example_and_framing_are_what_tensorflow_writes(tmp_path):
    image = StoredImage(b"\xff\xd8jpeg", "JPEG", 2, 3, 3)
    data = build_example(image, label_features((4,), ("cat",), False), "a.jpg", "k", (("w", 1.5),))
    parsed = tf.train.Example.FromString(data).features.feature
    assert parsed["image/class/label"].int64_list.value == [4]
    assert parsed["w"].float_list.value == [1.5]
    assert parsed["image/encoded"].bytes_list.value == [b"\xff\xd8jpeg"]
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(data)
    assert Path(path).read_bytes() == frame(data)


def test_the_docs_tf_data_snippet_reads_a_converted_dataset(convert):
    output, info = convert(SAMPLE / "manifest.csv", "--num_shards", "2")
    page = (Path(__file__).resolve().parents[1] / "docs" / "readers" / "tf-data.md").read_text()
    blocks = [part.split("```", 1)[0] for part in page.split("```python\n")[1:]]
    code = next(block for block in blocks if "TFRecordDataset" in block)
    namespace = {}
    root = output.parents[1]  # the dataset root: the snippet resolves LATEST itself
    exec(code.replace('"out/flowers"', repr(str(root))), namespace)  # batches of 8 of 40
    images, labels = next(iter(namespace["dataset"].unbatch().batch(40)))
    assert images.shape == (40, 224, 224, 3) and sorted(set(labels.numpy())) == [0, 1, 2, 3, 4]
