"""`tf.train.Example` bytes for one image, using the TPU reference feature keys.

Built with protobuf classes generated from `proto/example.proto` (wire-compatible with
TensorFlow's), so workers never import TensorFlow. Serialization is deterministic (map keys
sorted), which byte-reproducible shards depend on.
"""

import hashlib

from transforms.proto.example_pb2 import Example

# (key, dtype) of every record; what dataset_info.json publishes as the parsing spec.
IMAGE_FEATURES = (
    ("image/encoded", "string"),
    ("image/format", "string"),
    ("image/class/label", "int64"),
    ("image/class/text", "string"),
    ("image/height", "int64"),
    ("image/width", "int64"),
    ("image/channels", "int64"),
    ("image/filename", "string"),
    ("image/source_id", "string"),
    ("image/key/sha256", "string"),
)
_DTYPES = {"int64": "int64", "float": "float32", "bytes": "string"}


RAW_KEY = "image/raw"  # with --image_encoding raw: uint8 pixels, read with tf.io.decode_raw


def image_key(image_format: str) -> str:
    return RAW_KEY if image_format == "RAW" else "image/encoded"


def feature_spec(extra_features: tuple[tuple[str, str], ...], encoding: str) -> dict[str, str]:
    """Feature key → TF dtype name, for every scalar feature a record carries."""
    spec = dict(IMAGE_FEATURES)
    if encoding == "raw":
        spec = {RAW_KEY if key == "image/encoded" else key: dtype for key, dtype in spec.items()}
    spec.update((name, _DTYPES[kind]) for name, kind in extra_features)
    return spec


def _set(features, key: str, value) -> None:
    if isinstance(value, bytes):
        features[key].bytes_list.value.append(value)
    elif isinstance(value, str):
        features[key].bytes_list.value.append(value.encode("utf-8"))
    elif isinstance(value, float):
        features[key].float_list.value.append(value)
    else:
        features[key].int64_list.value.append(value)


def build_example(image, label_id: int, label_text: str, filename: str, key: str, extras) -> bytes:
    """Serialized Example for a `StoredImage` and its row's label, names and extra features."""
    example = Example()
    features = example.features.feature
    for name, value in (
        (image_key(image.format), image.data),
        ("image/format", image.format),
        ("image/class/label", label_id),
        ("image/class/text", label_text),
        ("image/height", image.height),
        ("image/width", image.width),
        ("image/channels", image.channels),
        ("image/filename", filename),
        ("image/source_id", key),
        ("image/key/sha256", hashlib.sha256(image.data).hexdigest()),
        *extras,
    ):
        _set(features, name, value)
    return example.SerializeToString(deterministic=True)
