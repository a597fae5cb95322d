"""tfrecord-pipeline: image/label manifests to sharded TFRecords of tf.train.Example."""

import importlib

from tfrecord_pipeline.config.options import ConvertOptions
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.read.load import load  # imports TensorFlow only when called
from tfrecord_pipeline.runners.convert import convert, run
from tfrecord_pipeline.version import __version__

__all__ = [
    "ConvertOptions",
    "DatasetInfo",
    "__version__",
    "build_pipeline",
    "convert",
    "load",
    "run",
    "tfds_builder",
    "verify",
]


# Imported when first asked for: `build_pipeline` imports Beam, `verify` protobuf's classes and
# Pillow, which a conversion (every `tfrecord-pipeline` command imports this package) never
# needs.
_LAZY = {
    "build_pipeline": "tfrecord_pipeline.runners.beam_pipeline",
    "verify": "tfrecord_pipeline.read.verify",
}


def tfds_builder(root: str):
    """The TensorFlow Datasets builder of the version the dataset root `root` publishes (or of
    the version folder `root`), local or gs://: `.info` holds the splits and features (label
    names included), `.as_dataset(split=...)` reads a split. `LATEST` is resolved once: a later
    publication does not change what this builder reads. Raises ValueError (one line) when
    `root` holds no complete version or TFDS cannot read it (gzip shards), and ImportError
    naming the [tfds] extra without TFDS, which is imported only here (tfrecord_pipeline/tfds.py
    says how the builder is made, and how `tfds.load` finds it)."""
    from tfrecord_pipeline.tfds import TfrecordPipeline

    return TfrecordPipeline(data_dir=root)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tfrecord_pipeline' has no attribute {name!r}")
