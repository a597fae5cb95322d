"""The tool's version, recorded in every dataset_info.json."""

__version__ = "0.1.0"
