"""The published version a run starts from: the base its label ids are inherited from, and
the records an `--incremental` run may reuse (handed to the refresh as `Previous.published`:
transforms/local/refresh.py, transforms/beam/refresh.py)."""

from typing import NamedTuple

from tfrecord_pipeline.dataset.labels_file import label_names
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.dataset.publish import Target
from tfrecord_pipeline.dataset.versions import (
    VERSIONS,
    Published,
    complete_version,
    is_complete,
    read_or_none,
)
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.plan.carried import ARCHIVES_FILE, ArchiveLine, parse_lines
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write.published import PublishedVersion


def base_version(target: Target) -> Published | None:
    """The version `target`'s run started from, as the pointer it read named it (a version
    published since is not this run's base)."""
    if target.base is None:
        return None
    folder = fileio.join(target.root, VERSIONS, target.base.version)
    return complete_version(folder, target.base, read_or_none)


def base_lost(target: Target) -> bool:
    """Whether the version `target`'s run started from is no longer complete: another run's
    retention deleted it (or a hand did), so reading it failed for that reason."""
    if target.base is None:
        return False
    return not is_complete(target.root, target.base.version)


class Previous(NamedTuple):
    """The published version a run starts from."""

    folder: str
    info: DatasetInfo

    def labels(self) -> LabelMap:
        """Its label ids; DatasetError when its `labels.txt` is not what its metadata says."""
        labels = self.info.labels
        kind = labels["kind"] == "integers"
        return LabelMap(tuple(label_names(self.folder, self.info)), labels["offset"], kind)

    def published(self) -> PublishedVersion:
        """It as a refresh reads it: its folder, its kind of shard file, and (split, shard)
        of every shard, splits by name, shards in its metadata's order."""
        shards = tuple(
            (name, shard)
            for name, split in sorted(self.info.splits.items())
            for shard in split.shards
        )
        return PublishedVersion(self.folder, self.info.shard_format(), shards)

    def archives(self) -> dict[str, ArchiveLine]:
        """The archives it was converted from, by path (transforms/plan/carried.py); none
        when it lists none, or its list cannot be read: then a refresh lists every archive."""
        try:
            return parse_lines(fileio.read_text(fileio.join(self.folder, ARCHIVES_FILE)))
        except fileio.UNAVAILABLE:
            raise
        except (*fileio.READ_ERRORS, ValueError, KeyError, TypeError, AttributeError):
            return {}


def previous_version(target: Target, label_offset: int) -> Previous | None:
    """The version the run starts from, if any; a --label_offset that would shift its label
    ids is refused (UserError): label ids never change across versions."""
    version = base_version(target)
    if version is None:
        return None
    previous = Previous(version.folder, DatasetInfo.from_json(version.info_text))
    check_label_offset(previous, label_offset)
    return previous


def check_label_offset(previous: Previous, label_offset: int) -> None:
    if previous.info.labels["kind"] == "names":
        offset = previous.info.labels["offset"]
        if label_offset not in (0, offset):
            raise UserError(
                f"--label_offset {label_offset}: the published version's ids start at "
                f"{offset}, and label ids never change across versions"
            )
