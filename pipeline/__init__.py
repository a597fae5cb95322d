"""tfrecord-pipeline: image/label manifests to sharded TFRecords of tf.train.Example."""

from pipeline.convert import build_pipeline, convert, run
from pipeline.load import load  # imports TensorFlow only when called
from pipeline.metadata import DatasetInfo
from pipeline.options import ConvertOptions
from pipeline.version import __version__

__all__ = [
    "ConvertOptions",
    "DatasetInfo",
    "__version__",
    "build_pipeline",
    "convert",
    "load",
    "run",
]
