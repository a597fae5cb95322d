"""pipeline/dataset/tfds_metadata.py without TFDS: the files TFDS reads, made from our metadata
(that TFDS itself reads them: test_tfds.py)."""

import json

import pytest
from conftest import dataset_info

from tfrecord_pipeline.dataset.metadata import SplitInfo, labels_entry
from tfrecord_pipeline.dataset.tfds_metadata import class_names, labels_file, tfds_files
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.tfrecord.examples import LABEL_KEY, RAW_KEY
from tfrecord_pipeline.transforms.write.published import ShardInfo


def _split(*records: int) -> SplitInfo:
    shards = [ShardInfo(f"s{n}", count, 10 * count, "") for n, count in enumerate(records)]
    return SplitInfo(sum(records), 10 * sum(records), 0, {}, shards)


def _named(*names: str, offset: int = 0, **fields):
    labels = labels_entry(LabelMap(names, offset))
    features = {"image/encoded": "string", LABEL_KEY: "int64", "image/class/text": "string"}
    splits = {"train": _split(3, 2), "test": _split(1)}
    return dataset_info(**{"labels": labels, "features": features, "splits": splits, **fields})


def test_ids_below_the_offset_get_names_no_label_has_and_integer_labels_none():
    assert class_names(_named("cat", "dog"), ["cat", "dog"]) == ["cat", "dog"]
    label_names = ["(no label 0)", "dog"]
    names = class_names(_named(*label_names, offset=2), label_names)
    assert names == ["(no label 0)_", "(no label 1)", "(no label 0)", "dog"]
    integers = dataset_info(labels={"kind": "integers", "offset": 0, "names": ["3"]})
    assert class_names(integers, ["3"]) is None


def test_splits_shards_and_features_are_described_as_tfds_writes_them():
    info = _named("cat", "dog", options={"channels": 1})
    files = tfds_files(info, ["cat", "dog"])
    assert sorted(files) == ["dataset_info.json", "features.json", labels_file(LABEL_KEY)]
    assert labels_file(LABEL_KEY) == "image.class.label.labels.txt"
    assert files[labels_file(LABEL_KEY)] == b"cat\ndog\n"
    described = json.loads(files["dataset_info.json"])
    splits = [(s["name"], s["shardLengths"], s["numBytes"]) for s in described["splits"]]
    assert splits == [("test", ["1"], "10"), ("train", ["3", "2"], "50")]
    assert described["supervisedKeys"] == {"input": "image/encoded", "output": LABEL_KEY}
    features = json.loads(files["features.json"])["featuresDict"]["features"]
    assert features[LABEL_KEY]["classLabel"] == {"numClasses": "2"}
    assert features["image/encoded"]["image"]["shape"]["dimensions"] == ["-1", "-1", "1"]
    assert features["image/class/text"]["pythonClassName"].endswith("text_feature.Text")


def test_lists_are_sequences_of_labels_or_tensors_and_raw_pixels_stay_bytes():
    features = {RAW_KEY: "string", LABEL_KEY: "int64", "image/class/text": "string"}
    lists = [LABEL_KEY, "image/class/text", "weight"]
    info = _named("a", features={**features, "weight": "float32"}, list_features=lists)
    files = tfds_files(info, ["a"])
    described = json.loads(files["features.json"])["featuresDict"]["features"]
    assert described[LABEL_KEY]["sequence"]["feature"]["classLabel"] == {"numClasses": "1"}
    assert described["image/class/text"]["sequence"]["feature"]["text"] == {}
    assert described["weight"]["tensor"]["shape"] == {"dimensions": ["-1"]}
    assert described[RAW_KEY]["tensor"] == {"dtype": "string", "encoding": "none", "shape": {}}
    assert json.loads(files["dataset_info.json"])["supervisedKeys"]["input"] == RAW_KEY


@pytest.mark.parametrize(
    "fields",
    [{"compression": "gzip"}, {"splits": {"_": _split(1)}}, {"splits": {"all": _split(1)}}],
    ids=["gzip", "no-letter-or-digit", "all"],
)
def test_nothing_is_written_for_a_dataset_tfds_cannot_read(fields):
    assert tfds_files(_named("cat", **fields), ["cat"]) == {}
