"""The read side's optional dependencies, imported when first used: `pip install
tfrecord-pipeline` brings the CLI and the whole conversion path without TensorFlow, and a
reader that needs more says which extra adds it, in one line."""

import importlib

# Each optional module, with the extra (setup.py's extras_require) that installs it and the
# name a user knows it by.
EXTRAS = {
    "tensorflow": ("tf", "TensorFlow"),
    "tensorflow_datasets": ("tfds", "TensorFlow Datasets"),
}


def optional_import(module: str, needed_by: str):
    """`module` imported; when it is not installed, an ImportError of one line naming the extra
    that installs it. A module missing inside an installed one (a broken install) is raised as
    it is: the extra would not mend it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        extra, known_as = EXTRAS[module]
        raise ImportError(
            f'{needed_by} needs {known_as}: pip install "tfrecord-pipeline[{extra}]"'
        ) from None
