"""TensorFlow Datasets on a converted dataset: a builder of its published version, which
`tfrecord_pipeline.tfds_builder(root)` returns and `tfds.load` finds by name.

Every version folder holds TFDS's description of itself (`dataset_info.json`, `features.json`:
dataset/tfds_metadata.py), so `tfds.builder_from_directory(folder)`, TFDS's documented way to
read a dataset that has no builder code, reads the folder as it is. The builder here is that
one, on the version `LATEST` publishes, resolved once and checked as `load()` checks it.

`tfds.load(name, data_dir=D)` finds a dataset in one of two ways: a builder class registered
under `name`, or files at `D/<name>[/<config>]/<X.Y.Z>/dataset_info.json`. The files' way does
not fit a dataset root: a version's folder is `versions/v000003-9f2c4e1a`, not `X.Y.Z`, and
which version is the dataset is `LATEST`'s to say (a rollback publishes an older one), where
TFDS would take the highest `X.Y.Z`. A folder of that shape would have to hold the shards, as
copies or links (gs:// has no links, and a dataset root holds none), beside or inside published
versions, which no later run changes. So the registered way is taken, as TFDS documents it for
datasets defined in code: importing this module registers the builder `tfrecord_pipeline` (the
name each version's `dataset_info.json` gives), whose `data_dir` is the dataset root:

    import tensorflow_datasets as tfds
    import tfrecord_pipeline.tfds  # registers "tfrecord_pipeline" with TFDS

    ds = tfds.load("tfrecord_pipeline", data_dir="out/flowers", split="train")

Nothing is written anywhere: the builder only reads. TFDS does not export its read-only
builder class under `tfds.core`; it is subclassed here, once, from the module that defines it.
"""

from tfrecord_pipeline.dataset.tfds_metadata import NAME, VERSION, readable_by_tfds
from tfrecord_pipeline.dataset.versions import DatasetError
from tfrecord_pipeline.read.extras import optional_import
from tfrecord_pipeline.read.reader import open_dataset

tfds = optional_import("tensorflow_datasets", "tfds_builder()")


def published_folder(root: str) -> str:
    """The folder of the version the dataset root `root` publishes (or the version folder
    `root`), once TFDS can read it; a DatasetError (a ValueError, one line) otherwise."""
    folder, info = open_dataset(root)
    if not readable_by_tfds(info):
        raise DatasetError(
            f"{folder} has no TFDS metadata: TFDS reads uncompressed shards only (convert "
            "without --compression gzip) and no split named 'all' or without a letter or digit"
        )
    return folder


class TfrecordPipeline(tfds.core.read_only_builder.ReadOnlyBuilder):
    """TFDS's read-only builder of the version the dataset root `data_dir` publishes. A
    converted dataset has one TFDS version and no configs: tfds.load's `version` may only name
    that one, and a config is refused."""

    name = NAME

    def __init__(self, *, data_dir=None, version=None, config=None, file_format=None):
        if data_dir is None:
            raise ValueError(f'tfds.load("{NAME}") needs data_dir=, the dataset root')
        if config or str(version or VERSION) != VERSION:
            raise ValueError(f"a converted dataset has no TFDS configs and one version, {VERSION}")
        folder = published_folder(str(data_dir))
        super().__init__(builder_dir=folder, file_format=file_format)
        self._original_state = {"data_dir": folder}  # unpickled on a worker: the same version
