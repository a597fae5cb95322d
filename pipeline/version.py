"""The tool's version, recorded in every tfrecord_pipeline.json."""

__version__ = "0.1.0"
