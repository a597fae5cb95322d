"""Our Example encoding against protobuf's own deterministic serialization of example.proto."""

import hashlib
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tfrecord_pipeline.transforms.image.config import StoredImage
from tfrecord_pipeline.transforms.tfrecord.examples import (
    Values,
    build_example,
    encode_example,
    label_features,
)
from tfrecord_pipeline.transforms.tfrecord.proto.example_pb2 import Example

INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
FLOAT32 = st.floats(allow_nan=False, width=32)
lists = st.one_of(
    st.builds(Values, st.just("int64"), st.tuples() | st.lists(INT64, max_size=20).map(tuple)),
    st.builds(Values, st.just("float32"), st.lists(FLOAT32, max_size=20).map(tuple)),
    st.builds(Values, st.just("string"), st.lists(st.binary(max_size=40), max_size=8).map(tuple)),
)
values = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=200),
    INT64,
    st.floats(allow_nan=False, width=64),
    lists,
)
keys = st.text(min_size=1, max_size=40)


def protobuf_bytes(features: dict) -> bytes:
    example = Example()
    for key, value in features.items():
        feature = example.features.feature[key]
        if isinstance(value, Values):  # an empty list is still a list of its kind
            kind = {"int64": "int64_list", "float32": "float_list", "string": "bytes_list"}
            getattr(feature, kind[value.dtype]).value.extend(value.items)
            getattr(feature, kind[value.dtype]).SetInParent()
        elif isinstance(value, str):
            feature.bytes_list.value.append(value.encode("utf-8"))
        elif isinstance(value, bytes):
            feature.bytes_list.value.append(value)
        elif isinstance(value, float):
            feature.float_list.value.append(value)
        else:
            feature.int64_list.value.append(value)
    return example.SerializeToString(deterministic=True)


def prefix_free(keys) -> bool:
    return not any(a != b and b.startswith(a) for a in keys for b in keys)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, values, min_size=1, max_size=12))
def test_any_features_encode_as_protobuf_serializes_them(features):
    encoded = encode_example(features)
    assert Example.FromString(encoded) == Example.FromString(protobuf_bytes(features))
    if prefix_free(features):  # upb puts "big" before "b"; we keep plain byte order
        assert encoded == protobuf_bytes(features)


def test_entries_are_in_the_byte_order_of_their_keys():
    encoded = encode_example({"big": 1, "b": 2, "image": 3, "image/encoded": b"", "é": 4})
    assert encoded.index(b"\x01b") < encoded.index(b"\x03big") < encoded.index(b"\x05image")
    assert encoded.index(b"\x05image") < encoded.index(b"\x0dimage/encoded")
    assert encoded.index(b"\x0dimage/encoded") < encoded.index("é".encode())
    assert len(Example.FromString(encoded).features.feature) == 5


def test_sizes_past_one_and_two_varint_bytes_and_float32_edges():
    features = {
        "image/encoded": bytes(range(256)) * 300,  # 76,800 bytes: a 3-byte length
        "a": b"x" * 127,
        "b": b"x" * 128,
        "c": "ü" * 70,
        "huge": 1e39,  # past float32: stored as infinity
        "minus huge": -1e39,
        "tiny": 1e-50,
        "negative": -1,
        "zero": 0,
        "ünïcode/kéy": 7,
    }
    assert encode_example(features) == protobuf_bytes(features)
    parsed = Example.FromString(encode_example(features)).features.feature
    assert parsed["huge"].float_list.value == [math.inf]
    assert parsed["negative"].int64_list.value == [-1]


def test_entries_whose_sizes_just_fit_one_byte_and_just_do_not_encode_as_protobuf_does():
    # Short entries are made at once, every size one byte; one byte more takes the long way.
    for key in ("k", "image/key/sha256", "k" * 60):
        for size in range(100, 130):
            features = {key: b"v" * size, "s": "é" * (size // 2)}
            assert encode_example(features) == protobuf_bytes(features), (key, size)


def test_integers_at_every_varint_length_boundary_encode_as_protobuf_does():
    # One to three bytes are made without a loop (the sizes of a record's fields); the loop
    # makes the rest, negatives as ten bytes.
    edges = [0, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152, 2**63 - 1, -1, -(2**63)]
    for value in edges:
        assert encode_example({"v": value}) == protobuf_bytes({"v": value}), value
    image = b"x" * 2_097_152  # a 4-byte length, and the entries' sizes around it
    assert encode_example({"image/encoded": image}) == protobuf_bytes({"image/encoded": image})


def test_a_records_features_are_the_reference_keys_and_the_extras():
    image = StoredImage(b"\xff\xd8jpeg", "JPEG", 2, 3, 3)
    labels = label_features((4,), ("cat",), False)
    record = build_example(image, labels, "a.jpg", "k1", (("weight", 0.5), ("id", b"7")))
    parsed = Example.FromString(record).features.feature
    assert sorted(parsed) == sorted(
        [
            "image/encoded",
            "image/format",
            "image/class/label",
            "image/class/text",
            "image/height",
            "image/width",
            "image/channels",
            "image/filename",
            "image/source_id",
            "image/key/sha256",
            "weight",
            "id",
        ]
    )
    assert parsed["image/class/label"].int64_list.value == [4]
    assert parsed["image/format"].bytes_list.value == [b"JPEG"]
    assert parsed["image/key/sha256"].bytes_list.value == [
        hashlib.sha256(image.data).hexdigest().encode()
    ]


def test_several_labels_are_lists_of_ids_and_texts_and_none_is_an_empty_list():
    image = StoredImage(b"\xff\xd8jpeg", "JPEG", 2, 3, 3)
    labels = label_features((2, 5), ("cat", "dog"), True)
    parsed = Example.FromString(build_example(image, labels, "a.jpg", "k", ())).features.feature
    assert parsed["image/class/label"].int64_list.value == [2, 5]
    assert parsed["image/class/text"].bytes_list.value == [b"cat", b"dog"]
    none = label_features((), (), True)
    parsed = Example.FromString(build_example(image, none, "a.jpg", "k", ())).features.feature
    assert parsed["image/class/label"].WhichOneof("kind") == "int64_list"
    assert list(parsed["image/class/label"].int64_list.value) == []
