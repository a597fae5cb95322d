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
from tfrecord_pipeline.dataset.metadata import INFO_FILE, DatasetInfo
from tfrecord_pipeline.dataset.publish import (
    SupersededError,
    Target,
    exclusive,
    publish,
    read_pointer,
)
from tfrecord_pipeline.dataset.version_files import version_file_problems
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
from tfrecord_pipeline.transforms.storage.file_checks import check_shards

PREVIOUS = "previous"  # --to previous: the version before the published one


class RolledBack(NamedTuple):
    """What a rollback published, and the pointer it replaced."""

    published: Pointer
    replaced: Pointer

    def said(self) -> str:
        if self.published == self.replaced:
            return f"{self.published.version} is the published version already"
        return f"published {self.published.version}, replacing {self.replaced.version}"


def rollback(root: str, version: str) -> RolledBack:
    """Publish `version` (its full name, its number when one version has it, or PREVIOUS: the
    newest version before the published one) of the dataset at `root` again; UserError for a
    root that is not a dataset or a version it cannot publish, SupersededError if another
    publication came first, or changed the dataset while the version was checked (its
    retention deleting it, say)."""
    root = root.rstrip("/")
    current, records = _published(root)
    try:
        name, pointer = _publishable(root, version, current, records)
        if pointer == current:
            return RolledBack(pointer, current)
        highest = history.highest_number(root, records, current)
        target = Target(root, name, current, history.last_serial(records), highest)
        publish(target, pointer)
    except (DatasetError, SupersededError) as error:
        raise _changed_meanwhile(root, version, current, records) or error from None
    return RolledBack(pointer, current)


def _publishable(
    root: str, version: str, current: Pointer, records: list[history.Record]
) -> tuple[str, Pointer]:
    """The folder name of `version` and the pointer that publishes it: `current` when it is
    published already, else once it is found complete, published before (when `records` say
    what was) and every file its metadata names is what the metadata says (`verify`'s check);
    DatasetError or UserError, one line, if not."""
    name = _previous(root, current, records) if version == PREVIOUS else _named(root, version)
    folder = fileio.join(root, VERSIONS, name)
    if not is_complete(root, name):
        raise DatasetError(f"{folder} is not complete (no {MARKER}): it cannot be published")
    published = complete_version(folder, None, read_or_none)
    pointer = Pointer(name, metadata_digest(published.info_text.encode("utf-8")))
    if pointer == current:
        return name, pointer
    if records and name not in {record.version for record in records}:
        raise UserError(f"{name} was never published in {root}; a rollback publishes one again")
    _refuse_damaged(folder, DatasetInfo.from_json(published.info_text))
    return name, pointer


def _refuse_damaged(folder: str, info: DatasetInfo) -> None:
    """A version whose files are not those its metadata describes (a byte changed, a file
    gone since it was published) is never published again: DatasetError, naming them. Its
    shards are checked by size and CRC-32C (on Cloud Storage the objects' own), its other
    files as `verify` checks them (pipeline/dataset/version_files.py)."""
    problems = version_file_problems(folder, info)
    shards = [shard for split in info.splits.values() for shard in split.shards]
    checked = zip(shards, check_shards(folder, shards), strict=True)
    problems += [
        f"{shard.file}: size, CRC-32C or index differs from {INFO_FILE}"
        for shard, sound in checked
        if not sound
    ]
    if problems:
        more = f"; {len(problems) - 3} more" if len(problems) > 3 else ""
        raise DatasetError(
            f"{folder} is damaged ({'; '.join(problems[:3])}{more}): it cannot be published "
            "(see verify)"
        )


def _changed_meanwhile(
    root: str, version: str, current: Pointer, records: list[history.Record]
) -> SupersededError | None:
    """The loss, if another run changed `root` since the rollback read `current` and `records`:
    it published, or its clean-up deleted versions (the one rolled back to, maybe, which is why
    the rollback failed). Asked under the root's lock or lease, so a clean-up under way is
    waited for and seen whole."""
    with exclusive(root):
        now = read_pointer(root)[0]
        after = history.read_records(root)
    if now == current and after == records:
        return None
    erased = sorted({record.version for record in records} - {r.version for r in after})
    done = (
        [f"published {now.version if now else 'nothing'}"] if now != current or not erased else []
    )
    done += [f"deleted {', '.join(erased)} (its --keep_versions)"] if erased else []
    return SupersededError(
        f"another run {' and '.join(done)} in {root} while this rollback to {version} ran, so "
        "it changed nothing; check what is published, then rerun"
    )


def _published(root: str) -> tuple[Pointer, list[history.Record]]:
    """What `root` publishes now (its pointer) and its publication records; UserError for a
    root that is not a dataset or cannot be read as one."""
    try:
        check_layout(root)
        current, _ = read_pointer(root)
        records = history.read_records(root)
    except fileio.UNAVAILABLE:
        raise  # the service's failure, not the root's: a fault
    except fileio.READ_ERRORS as error:
        raise UserError(f"{root} is not a dataset root this can read ({error})") from None
    if current is None:
        raise UserError(f"{root} is not a dataset root: it holds no {POINTER} (nothing published)")
    return current, records


def _previous(root: str, current: Pointer, records: list[history.Record]) -> str:
    """The version `--to previous` names: the newest complete one numbered below the published
    one, published once (when `records` say what was). By number, not by the order of
    publications: after a rollback, `previous` goes further back, never forward to the version
    rolled back from."""
    published = {record.version for record in records}
    below = [
        name
        for name in folders_in(root, VERSIONS)
        if sequence(name) < sequence(current.version)
        and (not records or name in published)
        and is_complete(root, name)
    ]
    if not below:
        raise DatasetError(
            f"{root} keeps no complete version published before {current.version}: nothing "
            "to roll back to"
        )
    return max(below, key=lambda name: (sequence(name), name))


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
