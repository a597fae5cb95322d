"""Examples of a converted dataset as Python values, without TensorFlow (preview, stats)."""

import posixpath
from collections.abc import Collection, Iterator

from google.protobuf.message import DecodeError

from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.dataset.versions import DatasetError, resolve
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.tfrecord.proto.example_pb2 import Example
from tfrecord_pipeline.transforms.tfrecord.records import RecordError
from tfrecord_pipeline.transforms.write.formats import ShardFormat


def open_dataset(path: str) -> tuple[str, DatasetInfo]:
    """The published version of the dataset root `path` (or the version folder `path`): its
    folder and metadata, resolved once; raises DatasetError (one line) for anything else."""
    published = resolve(path)
    try:
        return published.folder, DatasetInfo.from_json(published.info_text)
    except (ValueError, KeyError, TypeError) as error:
        raise UserError(f"{published.folder}: unreadable metadata ({error})") from None


def out_extension(target: str, extensions: Collection[str], command: str) -> str:
    """`target`'s extension, lower-cased, when it is one of `extensions` (what `command`'s
    `-o` writes); a UserError for any other, so a file never holds a format its name does not
    say. Checked before the dataset is read."""
    extension = posixpath.splitext(target)[1].lower()
    if extension not in extensions:
        raise UserError(
            f"{target}: {command} writes {', '.join(extensions)} files; name -o with one of them"
        )
    return extension


def write_out(target: str, data: bytes) -> None:
    """Write a command's `-o` file. A local path that cannot be written (a folder, a file in
    the way of a folder, no permission) is the user's to mend: one line. A full or failing disk
    stays a fault (pipeline/cli/faults.py)."""
    try:
        fileio.write_bytes(target, data)
    except (IsADirectoryError, NotADirectoryError, FileExistsError, PermissionError) as error:
        raise UserError(f"-o {target}: cannot write there ({error.strerror})") from None


def examples(output: str, info: DatasetInfo, split: str) -> Iterator[dict]:
    """Every record of `split` as {feature key: value}, in shard order: a list feature's values
    as a list (see DatasetInfo.list_features), any other feature's one value."""
    lists = frozenset(info.list_features)
    if split not in info.splits:
        raise UserError(f"no split {split!r} in {output}; it has {sorted(info.splits)}")
    for shard in info.splits[split].shards:
        for record in _records(output, shard.file, info.shard_format()):
            features = record.features.feature
            yield {
                key: values if key in lists else values[0]
                for key, feature in features.items()
                if (kind := feature.WhichOneof("kind"))
                and ((values := list(getattr(feature, kind).value)) or key in lists)
            }


def _records(output: str, name: str, shard_format: ShardFormat) -> Iterator[Example]:
    """A shard's Examples; a DatasetError of one line for a shard that is missing, cannot be
    read or is damaged (`verify` says what else is)."""
    path = fileio.join(output, name)
    try:
        for _, record in shard_format.records_at(path):
            yield Example.FromString(record)
    except (*fileio.READ_ERRORS, RecordError, DecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise DatasetError(f"{path} cannot be read ({reason}); run verify on {output}") from None
