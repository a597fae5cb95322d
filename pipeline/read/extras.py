"""The read side's optional dependencies, imported when first used: `pip install
tfrecord-pipeline` brings the CLI and the whole conversion path without TensorFlow, and a
reader that needs more says which extra adds it, in one line."""

import importlib

# Each optional module: the name a user knows it by, what pip installs for it (any TensorFlow
# build serves: tensorflow-cpu and tensorflow-tpu too), and the extra of setup.py's
# extras_require that installs the same.
EXTRAS = {
    "tensorflow": ("TensorFlow", "tensorflow", "tf"),
    "tensorflow_datasets": ("TensorFlow Datasets", "tensorflow tensorflow-datasets", "tfds"),
}


def optional_import(module: str, needed_by: str):
    """`module` imported; when it is not installed, an ImportError of one line saying what to
    install. A module missing inside an installed one (a broken install) is raised as it is:
    installing would not mend it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        known_as, packages, extra = EXTRAS[module]
        raise ImportError(
            f"{needed_by} needs {known_as}: pip install {packages} "
            f"(or install tfrecord-pipeline with its [{extra}] extra)"
        ) from None
