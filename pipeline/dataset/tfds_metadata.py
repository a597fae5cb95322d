"""TensorFlow Datasets' own description of a converted dataset, so that
`tfds.builder_from_directory(folder)` reads the folder as it is.

TFDS reads `dataset_info.json` (its DatasetInfo proto in proto3 JSON: splits, shard lengths and
the pattern of the shard names), `features.json` (a FeaturesDict whose flattened keys are the
Example's keys) and, for a ClassLabel with names, `<feature>.labels.txt`. They are made here
from our own metadata, as plain JSON: the conversion path imports neither TFDS nor TensorFlow.
"""

import json
import re

from tfrecord_pipeline.dataset.metadata import INFO_FILE, DatasetInfo
from tfrecord_pipeline.transforms.tfrecord.examples import LABEL_KEY, OBJECT_LABEL_KEY, RAW_KEY

NAME = "tfrecord_pipeline"
VERSION = "1.0.0"  # TFDS wants X.Y.Z here; the dataset's own versions are folders
# TFDS's names (tensorflow_datasets/core/naming.py): SHARD_X_OF_Y is `<index>-of-<count>`, both
# zero-padded to at least five digits, which is transforms/plan/sharding.py's ShardId.file_name;
# the suffix is the format's (`.tfrecord`, `.array_record`), TFDS's FileFormat names.
FILEPATH_TEMPLATE = "{SPLIT}-{SHARD_X_OF_Y}"
_FEATURES = "tensorflow_datasets.core.features."


def _tensor(dtype: str, shape: dict | None = None) -> dict:
    """A scalar, or a list of any length with `shape` {"dimensions": ["-1"]}; int64 values
    are strings in proto3 JSON, as TFDS writes them."""
    tensor = {"dtype": dtype, "encoding": "none", "shape": shape or {}}
    return {"pythonClassName": _FEATURES + "tensor_feature.Tensor", "tensor": tensor}


def _image(channels: int) -> dict:
    shape = {"dimensions": ["-1", "-1", str(channels)]}
    image = {"dtype": "uint8", "encodingFormat": "jpeg", "shape": shape}
    return {"pythonClassName": _FEATURES + "image_feature.Image", "image": image}


def _class_label(num_classes: int) -> dict:
    return {
        "pythonClassName": _FEATURES + "class_label_feature.ClassLabel",
        "classLabel": {"numClasses": str(num_classes)},
    }


_TEXT = {"pythonClassName": _FEATURES + "text_feature.Text", "text": {}}


def _sequence(feature: dict) -> dict:
    """Any number of `feature`s (several labels an image, and their texts)."""
    sequence = {"feature": feature, "length": "-1"}
    return {"pythonClassName": _FEATURES + "sequence_feature.Sequence", "sequence": sequence}


def class_names(info: DatasetInfo, names: list[str]) -> list[str] | None:
    """The ClassLabel's name of every id from 0, given the label names in id order, or None
    when labels are integers (their ids are the manifest's own: any int64, so no class count).
    TFDS numbers names from 0, each once: ids below --label_offset get a name no label has."""
    if info.labels["kind"] != "names":
        return None
    taken, unused = set(names), []
    for label_id in range(info.labels["offset"]):
        name = f"(no label {label_id})"
        while name in taken:
            name += "_"
        unused.append(name)
    return unused + names


def label_key(info: DatasetInfo) -> str:
    """The feature holding label ids: an image's, or (detection) its objects'."""
    return OBJECT_LABEL_KEY if OBJECT_LABEL_KEY in info.features else LABEL_KEY


def labels_file(key: str) -> str:
    """TFDS names a ClassLabel's file after its feature key, a `/` made `.`."""
    return key.replace("/", ".") + ".labels.txt"


def _feature(key: str, dtype: str, info: DatasetInfo, names: list[str] | None) -> dict:
    if key in info.list_features:
        if key == label_key(info) or (dtype == "string" and key.endswith("/text")):
            return _sequence(_scalar_feature(key, dtype, info, names))
        return _tensor(dtype, {"dimensions": ["-1"]})
    return _scalar_feature(key, dtype, info, names)


def _scalar_feature(key: str, dtype: str, info: DatasetInfo, names: list[str] | None) -> dict:
    if key == "image/encoded":  # with --image_encoding jpeg every stored image is a JPEG
        return _image(info.options.get("channels", 3))
    if key == label_key(info) and names is not None:
        return _class_label(len(names))
    if dtype == "string" and key != RAW_KEY:  # text from the manifest or the converter
        return _TEXT
    return _tensor(dtype)  # raw pixels stay bytes: TFDS reshapes only to one fixed shape


def readable_by_tfds(info: DatasetInfo) -> bool:
    """TFDS reads TFRecord files without a compression type, so gzip shards are not for it
    (ArrayRecord files, with `as_data_source()`, it reads);
    it refuses a split name without a letter or digit (`_`), and takes `all` to mean every
    split (a split of that name sends it into endless recursion)."""
    names_ok = all(re.search("[a-z0-9]", name) and name != "all" for name in info.splits)
    return info.compression == "none" and names_ok


def _json(value: dict) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8")


def tfds_files(info: DatasetInfo, label_names: list[str]) -> dict[str, bytes]:
    """Relative path → bytes of TFDS's files for this dataset, whose label names (in id order)
    are `label_names`; none when TFDS cannot read it."""
    if not readable_by_tfds(info):
        return {}
    names = class_names(info, label_names)
    features = {key: _feature(key, dtype, info, names) for key, dtype in info.features.items()}
    splits = [
        {
            "name": name,
            "filepathTemplate": FILEPATH_TEMPLATE + info.shard_format().suffix,
            "numBytes": str(split.bytes),
            "shardLengths": [str(shard.records) for shard in split.shards],
        }
        for name, split in sorted(info.splits.items())
    ]
    image = RAW_KEY if RAW_KEY in info.features else "image/encoded"
    dataset_info = {
        "name": NAME,
        "version": VERSION,
        "description": f"Converted by tfrecord-pipeline {info.tool_version}; see {INFO_FILE}.",
        "fileFormat": info.file_format,
        "splits": splits,
    }
    if LABEL_KEY in info.features:  # (image, label); a detection record has no one label
        dataset_info["supervisedKeys"] = {"input": image, "output": LABEL_KEY}
    files = {
        "dataset_info.json": _json(dataset_info),
        "features.json": _json(
            {
                "pythonClassName": _FEATURES + "features_dict.FeaturesDict",
                "featuresDict": {"features": features},
            }
        ),
    }
    if names is not None:
        files[labels_file(label_key(info))] = "".join(f"{name}\n" for name in names).encode("utf-8")
    return files
