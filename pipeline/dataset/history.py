"""The publication record: which versions were ever published, and in what order.

Each publication (a run's, a rollback's) writes the pointer, then an empty record
`_published/<serial>-<version>`, both under the root's lock or lease; the serial is one more
than the highest recorded. The record is what the pointer cannot say once it names another
version:

- a complete version with a record was published once, so a clean-up never deletes it as a
  run that lost or died (pipeline/dataset/retention.py); retention counts recorded versions,
  the most recently published first, whatever their numbers;
- a run publishes only if no other version was recorded since it started (its `Target.serial`),
  besides the pointer it compares: so a run started from v5 loses to a v6 published meanwhile
  even when LATEST names v5 again (a rollback, or LATEST written by hand);
- numbers are never reused: a run numbers after the highest version recorded or present.

The pointer keeps its two fields, so readers, and LATEST files older releases wrote, read as
before: the order lives in the records. A record is written after its pointer, so every record
names a version that was published: a run is never told it lost to one that was not. A run
killed between the two leaves its version published and unrecorded, which the next publication
records, as it records a `LATEST` another hand wrote (as a rollback would have been); a dataset
from before records (none exist) has its complete versions recorded then, in number order, the
published one last. A record needs no rename or precondition: its name is its own.
"""

import re
from typing import NamedTuple

from tfrecord_pipeline.dataset.layout import folders_in, own_folder
from tfrecord_pipeline.dataset.versions import PUBLISHED, VERSIONS, Pointer, is_complete, sequence
from tfrecord_pipeline.transforms.storage import fileio

_RECORD = re.compile(r"^(\d{8,})-(v\d{6,}-[0-9a-f]{8})$")


class Record(NamedTuple):
    """One publication: its place in publication order, and the version it published."""

    serial: int
    version: str

    @property
    def name(self) -> str:
        return f"{self.serial:08d}-{self.version}"


def read_records(root: str) -> list[Record]:
    """The records of `root`, in publication order (other names are not records)."""
    found = (_RECORD.match(name) for name in folders_in(root, PUBLISHED))
    return sorted(Record(int(match[1]), match[2]) for match in found if match)


def last_serial(records: list[Record]) -> int:
    return records[-1].serial if records else 0


def highest_number(root: str, records: list[Record], pointer: Pointer | None) -> int:
    """The highest version number any version folder, record or the pointer names."""
    names = folders_in(root, VERSIONS)
    names += [record.version for record in records] + ([pointer.version] if pointer else [])
    return max(map(sequence, names), default=0)


def newest_first(records: list[Record]) -> list[str]:
    """Recorded versions, the most recently published first, each once."""
    order = {record.version: record.serial for record in records}
    return sorted(order, key=lambda version: (order[version], version), reverse=True)


def note(
    root: str, records: list[Record], current: Pointer | None, version: str, highest: int
) -> Record:
    """Record the publication of `version`, which replaced `current`, once its pointer is
    written (`records`: those read just before); returns its record. Records `current` first
    when no record names it as the last publication (LATEST written by hand), and, in a
    dataset from before records, its complete versions numbered up to `highest`."""
    if records and records[-1].version == version:  # asked again: already recorded
        return records[-1]
    new = []
    if current and not records:
        complete = [
            name
            for name in folders_in(root, VERSIONS)
            if 0 < sequence(name) <= highest
            and name not in (current.version, version)
            and is_complete(root, name)
        ]
        new += sorted(complete, key=lambda name: (sequence(name), name))
    if current and (not records or records[-1].version != current.version):
        new.append(current.version)
    serial = last_serial(records)
    written = [Record(serial + offset, name) for offset, name in enumerate([*new, version], 1)]
    for record in written:
        fileio.write_bytes(fileio.join(root, PUBLISHED, record.name), b"")
    fileio.sync_file(fileio.join(root, PUBLISHED))
    return written[-1]


def erase(root: str, versions: set[str]) -> None:
    """Delete the records of `versions` (deleted versions, or a version that lost); never
    through a link."""
    if not own_folder(root, PUBLISHED):
        return
    names = [record.name for record in read_records(root) if record.version in versions]
    fileio.delete([fileio.join(root, PUBLISHED, name) for name in names])
