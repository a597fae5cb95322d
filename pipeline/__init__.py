"""tfrecord-pipeline: image/label manifests to sharded TFRecords of tf.train.Example."""

from pipeline.config.options import ConvertOptions
from pipeline.dataset.metadata import DatasetInfo
from pipeline.read.load import load  # imports TensorFlow only when called
from pipeline.runners.convert import convert, run
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


def __getattr__(name: str):
    """`build_pipeline` imports Beam, so only when asked for."""
    if name == "build_pipeline":
        from pipeline.runners.beam_pipeline import build_pipeline

        return build_pipeline
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
