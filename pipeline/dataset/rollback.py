"""Rolling a dataset back: an older version, published once and still complete, published again
through the same atomic pointer write as a run's (pipeline/dataset/publish.py).

A rollback is a publication like any other: it is recorded (pipeline/dataset/history.py), so a
run started before it loses (exit 4) rather than publishing over it, the next run numbers after
the highest version ever published, and retention counts the version rolled back to as the
most recently published. Nothing is deleted.
"""

from typing import NamedTuple

from tfrecord_pipeline.dataset import history
from tfrecord_pipeline.dataset.layout import check_layout, folders_in
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.dataset.publish import SupersededError, Target, publish, read_pointer
from tfrecord_pipeline.dataset.shard_check import check_shards
from tfrecord_pipeline.dataset.versions import (
    MARKER,
    POINTER,
    VERSIONS,
    DatasetError,
    Pointer,
    complete_version,
    is_complete,
    metadata_digest,
    read_or_none,
    sequence,
)
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.storage import fileio


class RolledBack(NamedTuple):
    """What a rollback published, and the pointer it replaced."""

    published: Pointer
    replaced: Pointer

    def said(self) -> str:
        if self.published == self.replaced:
            return f"{self.published.version} is the published version already"
        return f"published {self.published.version}, replacing {self.replaced.version}"


def rollback(root: str, version: str) -> RolledBack:
    """Publish `version` (its full name, or its number when one version has it) of the dataset
    at `root` again; UserError for a root that is not a dataset or a version it cannot publish,
    SupersededError if another publication came first."""
    root = root.rstrip("/")
    current, generation, records = _published(root)
    name = _named(root, version)
    folder = fileio.join(root, VERSIONS, name)
    if not is_complete(root, name):
        raise DatasetError(f"{folder} is not complete (no {MARKER}): it cannot be published")
    published = complete_version(folder, None, read_or_none)
    pointer = Pointer(name, metadata_digest(published.info_text.encode("utf-8")))
    if pointer == current:
        return RolledBack(pointer, current)
    if records and name not in {record.version for record in records}:
        raise UserError(f"{name} was never published in {root}; a rollback publishes one again")
    _refuse_damaged(folder, DatasetInfo.from_json(published.info_text))
    highest = history.highest_number(root, records, current)
    target = Target(root, name, current, generation, history.last_serial(records), highest)
    try:
        publish(target, pointer)
    except SupersededError:
        if not fileio.exists(fileio.join(folder, MARKER)):
            raise  # deleted meanwhile: the error says so
        now = read_pointer(root)[0]
        raise SupersededError(
            f"another run published {now.version if now else 'nothing'} in {root} while this "
            f"rollback to {name} ran, so it changed nothing; check what is published, then rerun"
        ) from None
    return RolledBack(pointer, current)


def _refuse_damaged(folder: str, info: DatasetInfo) -> None:
    """A version whose shards are not the files its metadata describes (a byte changed, a file
    gone since it was published) is never published again: DatasetError, naming them."""
    shards = [shard for split in info.splits.values() for shard in split.shards]
    checked = zip(shards, check_shards(folder, shards), strict=True)
    damaged = [shard.file for shard, sound in checked if not sound]
    if damaged:
        shown = ", ".join(damaged[:3]) + (", ..." if len(damaged) > 3 else "")
        raise DatasetError(
            f"{folder} is damaged: {len(damaged)} of its {len(shards)} shards ({shown}) are not "
            "the files its metadata describes; it cannot be published (see verify)"
        )


def _published(root: str) -> tuple[Pointer, int, list[history.Record]]:
    """What `root` publishes now (its pointer, and that pointer's generation on Cloud Storage)
    and its publication records; UserError for a root that is not a dataset or cannot be read
    as one."""
    try:
        check_layout(root)
        current, generation = read_pointer(root)
        records = history.read_records(root)
    except fileio.UNAVAILABLE:
        raise  # the service's failure, not the root's: a fault
    except fileio.READ_ERRORS as error:
        raise UserError(f"{root} is not a dataset root this can read ({error})") from None
    if current is None:
        raise UserError(f"{root} is not a dataset root: it holds no {POINTER} (nothing published)")
    return current, generation, records


def _named(root: str, version: str) -> str:
    """The version folder `version` names: itself, or the one folder of that number."""
    names = folders_in(root, VERSIONS)
    if version in names:
        return version
    number = sequence(f"{version}-00000000") or (int(version) if version.isdigit() else 0)
    matching = [name for name in names if number and sequence(name) == number]
    if len(matching) == 1:
        return matching[0]
    shown = ", ".join(names[-5:]) or "none"
    raise DatasetError(
        f"{root} has no version {version!r}"
        + (" alone: name one in full" if matching else "")
        + f" (its newest versions: {shown})"
    )
