"""tfrecord-pipeline: image/label manifests to sharded TFRecords of tf.train.Example."""

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
]


def __getattr__(name: str):
    """`build_pipeline` imports Beam, so only when asked for."""
    if name == "build_pipeline":
        from tfrecord_pipeline.runners.beam_pipeline import build_pipeline

        return build_pipeline
    raise AttributeError(f"module 'tfrecord_pipeline' has no attribute {name!r}")
