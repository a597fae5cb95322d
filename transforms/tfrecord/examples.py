"""`tf.train.Example` bytes for one image, using the TPU reference feature keys.

Encoded here, in the wire format of TensorFlow's example.proto (`proto/example.proto`), rather
than through protobuf's message classes: the bytes are those of protobuf's deterministic
serialization (map entries sorted by key, which byte-reproducible shards depend on; tests
compare the two and read the records with TensorFlow), at the same cost per record, and the
writer imports neither the protobuf runtime (a share of every run's start-up) nor TensorFlow.
"""

import functools
import hashlib
import struct
from typing import NamedTuple

LABEL_KEY, LABEL_TEXT_KEY = "image/class/label", "image/class/text"
OBJECT_LABEL_KEY = "image/object/class/label"
# (key, dtype) of every record; what tfrecord_pipeline.json publishes as the parsing spec.
IMAGE_FEATURES = (
    ("image/encoded", "string"),
    ("image/format", "string"),
    (LABEL_KEY, "int64"),
    (LABEL_TEXT_KEY, "string"),
    ("image/height", "int64"),
    ("image/width", "int64"),
    ("image/channels", "int64"),
    ("image/filename", "string"),
    ("image/source_id", "string"),
    ("image/key/sha256", "string"),
)
# A detection record's objects, a list each, one entry an object (the TPU detection readers'
# keys): boxes normalised to the stored image; the label (a COCO category id stays its id) and
# its name; the area in pixels of the stored image; COCO's crowd flag. Such a record has no
# image/class/label: no one label describes a detection image.
OBJECT_FEATURES = (
    ("image/object/bbox/xmin", "float32"),
    ("image/object/bbox/ymin", "float32"),
    ("image/object/bbox/xmax", "float32"),
    ("image/object/bbox/ymax", "float32"),
    (OBJECT_LABEL_KEY, "int64"),
    ("image/object/class/text", "string"),
    ("image/object/area", "float32"),
    ("image/object/is_crowd", "int64"),
)
# With --masks, each object's mask: a PNG of the stored image's size, 1 inside, 0 outside.
MASK_FEATURE = ("image/object/mask", "string")
_DTYPES = {"int64": "int64", "float": "float32", "bytes": "string"}


RAW_KEY = "image/raw"  # with --image_encoding raw: uint8 pixels, read with tf.io.decode_raw


def image_key(image_format: str) -> str:
    return RAW_KEY if image_format == "RAW" else "image/encoded"


class Values(NamedTuple):
    """A list-valued feature: any number of values (none too), all of one dtype. Several
    labels of one image, and a detection's per-object fields, are stored as lists."""

    dtype: str  # "int64", "float32" or "string", as the parsing spec names them
    items: tuple


class FeatureSpec(NamedTuple):
    """What tfrecord_pipeline.json publishes as the parsing spec: every feature's dtype, and
    which of them are lists (read with `tf.io.VarLenFeature`; the others are scalars)."""

    dtypes: dict[str, str]  # feature key → dtype
    lists: tuple[str, ...]  # sorted keys of the list-valued features


def feature_spec(
    extra_features: tuple[tuple[str, str], ...],
    encoding: str,
    multi_label: bool = False,
    detection: bool = False,
    masks: bool = False,
) -> FeatureSpec:
    """The feature keys and dtypes every record carries; with `multi_label`, the label and
    its text are lists; with `detection`, the objects' lists replace them (`masks`: their
    masks too)."""
    dtypes = dict(IMAGE_FEATURES)
    if encoding == "raw":
        dtypes = {RAW_KEY if key == "image/encoded" else key: kind for key, kind in dtypes.items()}
    dtypes.update((name, _DTYPES[kind]) for name, kind in extra_features)
    if detection:
        del dtypes[LABEL_KEY], dtypes[LABEL_TEXT_KEY]
        objects = (*OBJECT_FEATURES, MASK_FEATURE) if masks else OBJECT_FEATURES
        dtypes.update(objects)
        return FeatureSpec(dtypes, tuple(sorted(dict(objects))))
    return FeatureSpec(dtypes, (LABEL_KEY, LABEL_TEXT_KEY) if multi_label else ())


def label_features(label_ids: tuple[int, ...], texts: tuple[str, ...], multi: bool) -> dict:
    """A record's label features: one id and its text, or (multi-label) the lists of them."""
    if multi:
        return {
            LABEL_KEY: Values("int64", label_ids),
            LABEL_TEXT_KEY: Values("string", tuple(text.encode("utf-8") for text in texts)),
        }
    return {LABEL_KEY: label_ids[0], LABEL_TEXT_KEY: texts[0]}


def object_features(objects, label_ids: tuple[int, ...], masks: bool = False) -> dict:
    """A detection record's object lists, from its placed objects (transforms/image/placement.py
    `PlacedObject`) and their label ids, in the objects' order (an image without any: empty
    lists, a negative); `masks`: their masks' PNGs too."""
    columns = (
        tuple(o.xmin for o in objects),
        tuple(o.ymin for o in objects),
        tuple(o.xmax for o in objects),
        tuple(o.ymax for o in objects),
        label_ids,
        tuple(o.text.encode("utf-8") for o in objects),
        tuple(o.area for o in objects),
        tuple(int(o.is_crowd) for o in objects),
    )
    features = {
        key: Values(dtype, values)
        for (key, dtype), values in zip(OBJECT_FEATURES, columns, strict=True)
    }
    if masks:
        features[MASK_FEATURE[0]] = Values(MASK_FEATURE[1], tuple(o.mask for o in objects))
    return features


_ONE_BYTE = [bytes([value]) for value in range(0x80)]
_ONE_BYTE_SIZES = 0x80 - 5  # an entry of a shorter key field and value has 1-byte sizes only


def _varint(value: int) -> bytes:
    """Base-128 varint (negative: 64-bit two's complement), as protobuf writes it; up to 2 MiB
    (a record's field sizes) made without a loop."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if 0 < value < 0x4000:
        return bytes((value & 0x7F | 0x80, value >> 7))
    if 0 < value < 0x200000:
        return bytes((value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14))
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _float32(value: float) -> bytes:
    try:
        return struct.pack("<f", value)
    except OverflowError:  # protobuf stores a double out of float32's range as infinity
        return struct.pack("<f", float("inf") if value > 0 else float("-inf"))


# Tags (field number << 3 | wire type 2: length-delimited) of what an Example nests:
# Example.features > Features.feature, a map entry > its key and its value, a Feature > one
# of bytes_list, float_list, int64_list > that list's `value` (floats and ints packed, as
# proto3 packs them).
_TAG_1, _TAG_2, _TAG_3 = b"\x0a", b"\x12", b"\x1a"


@functools.cache
def _key_field(key: str) -> bytes:
    """A map entry's key field and the tag of the value field after it."""
    name = key.encode("utf-8")
    return _TAG_1 + _varint(len(name)) + name + _TAG_2


def _list_payload(values: Values) -> tuple[bytes, bytes]:
    """(tag of the Feature's list field, the list message's bytes) for a list feature; numbers
    packed, as proto3 packs them (an empty list is an empty message)."""
    if values.dtype == "string":
        parts = []
        for item in values.items:
            parts += (_TAG_1, _varint(len(item)), item)
        return _TAG_1, b"".join(parts)
    if values.dtype == "float32":
        tag, packed = _TAG_2, b"".join(map(_float32, values.items))
    else:
        tag, packed = _TAG_3, b"".join(map(_varint, values.items))
    return tag, _TAG_1 + _varint(len(packed)) + packed if packed else b""


def _entry(key: str, value: bytes | str | int | float | Values) -> tuple[bytes, ...]:
    """One map entry as parts; the value is a part of its own, so an image is copied once,
    into the record."""
    if isinstance(value, Values):
        list_tag, payload = _list_payload(value)
        head = _key_field(key) + _varint(1 + len(_varint(len(payload))) + len(payload))
        head += list_tag + _varint(len(payload))
        return _TAG_1, _varint(len(head) + len(payload)), head, payload
    if isinstance(value, str):
        list_tag, value = _TAG_1, value.encode("utf-8")
    elif isinstance(value, bytes):
        list_tag = _TAG_1
    elif isinstance(value, float):
        list_tag, value = _TAG_2, _float32(value)
    else:
        list_tag, value = _TAG_3, _varint(value)
    size, key_field = len(value), _key_field(key)
    if len(key_field) + size < _ONE_BYTE_SIZES:  # every size below is one byte: made at once
        head = bytes((len(key_field) + 5 + size,))
        sizes = bytes((4 + size, list_tag[0], 2 + size, _TAG_1[0], size))
        return _TAG_1, head, key_field, sizes, value
    value_size = _varint(size)
    list_size = 1 + len(value_size) + len(value)
    list_head = list_tag + _varint(list_size) + _TAG_1 + value_size
    feature_size = len(list_head) + len(value)
    entry_head = key_field + _varint(feature_size) + list_head
    return _TAG_1, _varint(len(entry_head) + len(value)), entry_head, value


# Features whose values recur from record to record (one format, a few labels and sizes): their
# entries are encoded once and kept, a third of the encoding work of a record.
_RECURRING = frozenset(
    {"image/format", LABEL_KEY, LABEL_TEXT_KEY, "image/height", "image/width", "image/channels"}
)
_recurring_entry = functools.lru_cache(maxsize=4096, typed=True)(_entry)  # typed: 3 is not 3.0


def encode_example(features: dict[str, bytes | str | int | float | Values]) -> bytes:
    """The Example with one single-value feature per key, map entries in the byte order of
    their UTF-8 keys (as protobuf's C++ runtime sorts them; its upb runtime puts a longer key
    before its own prefix, which no two reference keys are)."""
    parts = [_TAG_1, b""]  # the Features field; its size goes in second
    for key in sorted(features):  # code point order is UTF-8 byte order
        entry = _recurring_entry if key in _RECURRING else _entry
        parts += entry(key, features[key])
    parts[1] = _varint(sum(map(len, parts)) - 1)
    return b"".join(parts)


def build_example(image, labels: dict, filename: str, key: str, extras) -> bytes:
    """Serialized Example for a `StoredImage`, its label features (`label_features`), its
    row's names and extra features."""
    return encode_example(
        {
            image_key(image.format): image.data,
            "image/format": image.format,
            **labels,
            "image/height": image.height,
            "image/width": image.width,
            "image/channels": image.channels,
            "image/filename": filename,
            "image/source_id": key,
            "image/key/sha256": hashlib.sha256(image.data).hexdigest(),
            **dict(extras),
        }
    )
