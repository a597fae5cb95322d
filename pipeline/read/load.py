"""`load(...)`: a converted dataset as a tf.data pipeline for TPU training.

Everything comes from tfrecord_pipeline.json: the shard files (so gs:// works and nothing is
globbed), the compression, and the parsing spec. TensorFlow (the [tf] extra) is imported here
only, when `load` runs; the conversion path never imports this module.
"""

import json
from typing import NamedTuple

from tfrecord_pipeline.dataset.metadata import label_count
from tfrecord_pipeline.dataset.versions import DatasetError, resolve
from tfrecord_pipeline.read.extras import optional_import
from tfrecord_pipeline.transforms.tfrecord.examples import LABEL_KEY, OBJECT_LABEL_KEY
from tfrecord_pipeline.transforms.write.array_records import read_array_record_path


def _tf():
    """TensorFlow, or the one-line ImportError naming the [tf] extra."""
    return optional_import("tensorflow", "load()")


def _gfile_reader(tf):
    """A file's bytes through TensorFlow's file systems, or None when there is none; a
    DatasetError (a ValueError, one line) for one that cannot be read (a folder)."""

    def read(path: str) -> bytes | None:
        try:
            with tf.io.gfile.GFile(path, "rb") as handle:
                return handle.read()
        except tf.errors.NotFoundError:
            return None
        except tf.errors.OpError as error:
            raise DatasetError(f"cannot read {error.message}") from None

    return read


def _file_records(tf, info: dict):
    """A function of a shard file's path to the tf.data.Dataset of its serialized records: a
    TFRecord file (gzip or not) by TensorFlow's reader; an ArrayRecord file, which tf.data
    cannot read, by array_record's, in order (Grain's ArrayRecordDataSource reads them by
    index)."""
    if info.get("file_format") == "array_record":
        spec = tf.TensorSpec([], tf.string)

        def records(path: bytes):
            for _, record in read_array_record_path(path.decode()):
                yield record

        return lambda path: tf.data.Dataset.from_generator(
            records, args=(path,), output_signature=spec
        )
    compression = "GZIP" if info["compression"] == "gzip" else ""
    return lambda path: tf.data.TFRecordDataset(path, compression_type=compression)


def parsing_spec(tf, info: dict) -> dict:
    """The `tf.io.parse_single_example` spec of the dataset's records: a list feature (several
    labels, a detection's objects) as a 1-D tensor of its values, any other as a scalar."""
    dtypes = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}
    lists = set(info.get("list_features", ()))
    return {
        key: tf.io.RaggedFeature(dtypes[dtype])
        if key in lists
        else tf.io.FixedLenFeature([], dtypes[dtype])
        for key, dtype in info["features"].items()
    }


def num_classes(info: dict) -> int | None:
    """How many classes the dataset's label ids index: the largest id + 1 (with names, the
    --label_offset + their count), which is the width of a classifier's last layer and of a
    multi-hot vector. None for integer ids that cannot index one (negative, or over 2^20)."""
    labels = info["labels"]
    if labels["kind"] == "names":
        return labels["offset"] + label_count(labels)
    ids = [int(name) for name in labels["names"]]
    if ids and (min(ids) < 0 or max(ids) >= 1 << 20):
        return None
    return max(ids, default=-1) + 1


class LoadInfo(NamedTuple):
    """What `load(..., with_info=True)` read, of the one version its dataset reads."""

    folder: str  # the version's folder (LATEST resolved once)
    num_classes: int | None  # label ids are 0 .. num_classes - 1 (None: see num_classes())
    examples: int  # records in this host's share of the split


def is_detection(info: dict) -> bool:
    """Whether the dataset's records hold objects (boxes) rather than a label."""
    return OBJECT_LABEL_KEY in info.get("list_features", ())


def _objects(tf, example: dict) -> dict:
    """A detection record's objects as the TPU detection models take them: boxes [N, 4] as
    (ymin, xmin, ymax, xmax), normalised (so they hold after `image_size`'s resize)."""
    sides = ("ymin", "xmin", "ymax", "xmax")
    return {
        "boxes": tf.stack([example[f"image/object/bbox/{side}"] for side in sides], axis=-1),
        "classes": example[OBJECT_LABEL_KEY],
        "is_crowd": example["image/object/is_crowd"],
        "area": example["image/object/area"],
    }


def _parse_and_decode(tf, info: dict, image_size, channels: int | None, with_features: bool):
    spec = parsing_spec(tf, info)
    raw = "image/raw" in spec
    multi_hot = LABEL_KEY in info.get("list_features", ()) and not with_features
    detection = is_detection(info)
    depth = num_classes(info) if multi_hot else 0
    if depth is None:
        raise ValueError(
            "integer labels cannot index a multi-hot vector (negative, or over 2^20); "
            "load with with_features=True and map the ids yourself"
        )
    channels = channels or (1 if info["options"].get("channels") == 1 else 3)

    def parse(record):
        example = tf.io.parse_single_example(record, spec)
        if raw:
            shape = [example["image/height"], example["image/width"], example["image/channels"]]
            image = tf.reshape(tf.io.decode_raw(example["image/raw"], tf.uint8), shape)
        else:
            image = tf.io.decode_jpeg(example["image/encoded"], channels=channels)
        if image_size is not None:
            image = tf.image.resize(image, image_size)  # float32, what TPU models take
        if with_features:
            return {**example, "image": image}
        if detection:
            return image, _objects(tf, example)
        if multi_hot:  # 1.0 at each of its (distinct) label ids; none: all zeros
            hot = tf.reduce_sum(tf.one_hot(example[LABEL_KEY], depth), axis=0)
            return image, tf.ensure_shape(hot, [depth])
        return image, example[LABEL_KEY]

    return parse


def load(
    output: str,
    split: str = "train",
    batch_size: int | None = 128,
    image_size: tuple[int, int] | None = (224, 224),
    shuffle_buffer: int = 10_000,
    num_hosts: int = 1,
    host_index: int = 0,
    drop_remainder: bool | None = None,
    with_features: bool = False,
    channels: int | None = None,
    seed: int | None = None,
    with_info: bool = False,
):
    """A tf.data.Dataset of `(image, label)` (or the full feature dict plus "image"). With
    several labels an image (--multi_label) the label is a float32 multi-hot vector as long as
    the largest label id + 1. A detection dataset gives `(image, objects)`: "boxes" [N, 4]
    (ymin, xmin, ymax, xmax, normalised), "classes", "is_crowd" and "area" [N], batched as
    tf.RaggedTensors (N differs from image to image; `.to_tensor()` pads them).

    Args:
      output: the dataset root (its published version is read) or a version folder, local
        or gs://; raises ValueError when it holds no complete, published version.
      split: which split to read.
      batch_size: per-host batch size; None for unbatched examples.
      image_size: (height, width) every image is resized to; None keeps decoded uint8 images
        at their own sizes (then batch_size must be None).
      shuffle_buffer: examples in the shuffle buffer; 0 reads in file order, deterministically.
      num_hosts, host_index: read only this host's share of the shard files (file-level
        sharding, as TPU pod slices do); needs at least `num_hosts` shards.
      drop_remainder: drop a last partial batch (static shapes for TPU). Default: on for the
        "train" split only; another split (validation, test) keeps it, so a split smaller than
        a batch is not empty and every example is evaluated.
      with_features: return every recorded feature, with the decoded image under "image";
        a list feature is a 1-D tensor of its values, batched as a tf.RaggedTensor.
      channels: decode to this many channels (default: what the dataset stores).
      seed: shuffle seed, for reproducible order.
      with_info: return `(dataset, LoadInfo)`: the version read and its `num_classes`, the
        width a classifier's last layer needs (`keras.layers.Dense(info.num_classes)`).
    """
    tf = _tf()
    published = resolve(output, _gfile_reader(tf))  # once: a later publication changes nothing
    info, output = json.loads(published.info_text), published.folder
    if split not in info["splits"]:
        raise ValueError(f"no split {split!r} in {output}; it has {sorted(info['splits'])}")
    if image_size is None and batch_size is not None:
        raise ValueError("batching needs one image_size; pass image_size or batch_size=None")
    shards = info["splits"][split]["shards"]
    if len(shards) < num_hosts or not 0 <= host_index < num_hosts:
        raise ValueError(f"{len(shards)} shards cannot be shared by {num_hosts} hosts")
    shards = shards[host_index::num_hosts]
    files = [f"{output}/{shard['file']}" for shard in shards]
    shuffle = shuffle_buffer > 0
    if drop_remainder is None:
        drop_remainder = split == "train"

    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.interleave(
        _file_records(tf, info),
        cycle_length=min(len(files), 16),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not shuffle,
    )
    # The count the metadata holds, so Keras knows an epoch's length (else it warns, after the
    # first, that the input "ran out of data") and len() works; checked as records are read.
    records = sum(shard["records"] for shard in shards)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(records))
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed)
    parse = _parse_and_decode(tf, info, image_size, channels, with_features)
    dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=not shuffle)
    ragged = with_features or is_detection(info)  # lists of another length each record
    if batch_size is not None and ragged and info.get("list_features"):
        dataset = dataset.ragged_batch(batch_size, drop_remainder=drop_remainder)
    elif batch_size is not None:
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    return (dataset, LoadInfo(output, num_classes(info), records)) if with_info else dataset
