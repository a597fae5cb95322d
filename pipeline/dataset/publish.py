"""A run's writes and their publication: its own version and staging folders, and the pointer's
one atomic write (the layout: pipeline/dataset/versions.py; the clean-up after a publication:
pipeline/dataset/retention.py).

A run writes only into its own version and staging folders, named by a random id, so nothing it
does (killed, retried, orphaned, racing another run) can touch a byte another run wrote. Its
version becomes visible in one atomic step, the pointer's write, made only if no publication
happened since the run started: the pointer still names the version the run started from, and
no other version was recorded since (pipeline/dataset/history.py: a rollback, or LATEST written
by hand, is a publication too). The compare and the write are made under the root's lock: an
exclusive flock on a local disk, a lease object on Cloud Storage, where the write also carries
the pointer's generation as its precondition. Of two runs started from the same version one
publishes and the other is told so (SupersededError). A rollback
(pipeline/dataset/rollback.py) publishes through the same write.
"""

import contextlib
import dataclasses
import fcntl
import os
from concurrent.futures import ThreadPoolExecutor

from tfrecord_pipeline.dataset import history
from tfrecord_pipeline.dataset.layout import (
    TEMPORARY,
    check_layout,
    check_lock,
    delete_folder,
    delete_version,
    make_layout,
    refuse_foreign,
    refuse_nested,
)
from tfrecord_pipeline.dataset.versions import (
    LEASE,
    LOCK,
    MARKER,
    POINTER,
    STAGING,
    VERSIONS,
    Pointer,
)
from tfrecord_pipeline.transforms.errors import FaultError, UserError
from tfrecord_pipeline.transforms.storage import fileio, gcs, leases
from tfrecord_pipeline.transforms.storage.answers import PreconditionFailedError

REMOTE_MOVES_AT_ONCE = 64


class SupersededError(FaultError):
    """Another run published a version of the same dataset while this one ran."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where one run writes: its version of the dataset at `root`, decided before any work,
    and what the run found published when it started."""

    root: str
    version: str
    base: Pointer | None  # the version published when the run started; None for the first
    serial: int = 0  # the last publication recorded then (pipeline/dataset/history.py)
    highest: int = 0  # the highest version number then
    made: tuple[str, ...] = ()  # the layout this run made (layout.py make_layout), if any

    @property
    def folder(self) -> str:
        return fileio.join(self.root, VERSIONS, self.version)

    @property
    def staging(self) -> str:
        return fileio.join(self.root, STAGING, self.version)


def start(root: str) -> Target:
    """A new version of the dataset at `root`, for a run starting now, numbered after every
    version ever published. A folder that is not one of this tool's datasets, or whose layout
    holds a link, is refused (UserError): nothing in it is ever touched."""
    try:
        fileio.check_writable_folder(root)
        names = fileio.names_in(root)
        refuse_foreign(root, names)
        refuse_nested(root)
        check_layout(root)
        base, _ = read_pointer(root)
        records = history.read_records(root)
        highest = history.highest_number(root, records, base)
        made = make_layout(root) if VERSIONS not in names else ()
    except fileio.UNAVAILABLE:
        raise  # the service's failure, not the output's: a fault
    except fileio.READ_ERRORS as error:
        raise UserError(f"--output {root}: cannot write there ({error})") from None
    version = f"v{highest + 1:06d}-{os.urandom(4).hex()}"
    return Target(root, version, base, history.last_serial(records), highest, made)


def read_pointer(root: str) -> tuple[Pointer | None, int]:
    """The published version's pointer (None before the first), and its generation on Cloud
    Storage, over which alone a publication writes."""
    path = fileio.join(root, POINTER)
    if not fileio.is_remote(root):
        if not os.path.lexists(path):
            return None, 0
        return Pointer.parse(fileio.read_bytes(path), path), 0
    read = gcs.read_generation(path)
    return (Pointer.parse(read[0], path), read[1]) if read else (None, 0)


def superseded(target: Target, other: str | None, now: str | None = None) -> SupersededError:
    """The loss to `other`, published since `target`'s run started; `now` is published now
    when it is another (LATEST written back by hand)."""
    other = other or "nothing"
    return SupersededError(
        f"another run published {other} in {target.root} while this one ran, so this run's "
        f"{target.version} was not published; rerun to convert again from {now or other}"
    )


def published_since(target: Target) -> Pointer | None:
    """The version published now, if another publication was made since `target`'s run
    started: the pointer moved, or a publication was recorded since (a run's, then a rollback
    to this run's base: the pointer names the base again, and this run still lost). Asked
    under the root's lock or lease, so a publication under way is seen whole or not at all."""
    with exclusive(target.root):
        current, _ = read_pointer(target.root)
        if current is None or current.version == target.version:
            return None
        if current != target.base:
            return current
        records = history.read_records(target.root)
    return current if _recorded_since(target, records) else None


def _recorded_since(target: Target, records: list[history.Record]) -> str | None:
    """The last publication recorded since `target`'s run started, other than its own; none
    when the only one is its base's (recorded after the run read its pointer)."""
    later = [r.version for r in records if r.serial > target.serial and r.version != target.version]
    base = target.base.version if target.base else None
    return later[-1] if set(later) - {base} else None


def publish(target: Target, pointer: Pointer) -> None:
    """Make `pointer` the published version in one atomic write, if nothing was published
    since `target`'s run started; raises SupersededError if something was. Asking again after
    success (a retried commit) succeeds. Under the root's lock (a local disk) or lease (Cloud
    Storage): the checks, the pointer's write, then its record."""
    with exclusive(target.root):
        check_layout(target.root)
        current, generation = read_pointer(target.root)
        if current == pointer:
            _record(target, pointer)
            return
        if current != target.base:
            raise superseded(target, current.version if current else None)
        records = history.read_records(target.root)
        if other := _recorded_since(target, records):
            raise superseded(target, other, target.base.version if target.base else None)
        if not fileio.exists(fileio.join(target.folder, MARKER)):  # a rollback's version
            raise SupersededError(
                f"{target.folder} was deleted by another run's --keep_versions while this ran, "
                "so nothing was published; check what is published, then rerun"
            )
        _write_pointer(target, pointer, generation)
        _record(target, pointer)


def _write_pointer(target: Target, pointer: Pointer, generation: int) -> None:
    """The pointer's write: locally beside, flushed and renamed (leftovers of killed writes
    deleted first: none is being written, the lock is held); on Cloud Storage only over the
    generation read under the lease, so a holder whose lease lapsed unawares cannot write over
    another's publication, and a write sent again after its answer was lost is found made."""
    path = fileio.join(target.root, POINTER)
    if not fileio.is_remote(target.root):
        for name in fileio.names_in(target.root):
            if name.startswith(TEMPORARY):
                fileio.delete([fileio.join(target.root, name)])
        fileio.write_durably(path, pointer.to_bytes())
        return
    try:
        gcs.write(path, pointer.to_bytes(), generation, "application/json")
    except PreconditionFailedError:
        current, _ = read_pointer(target.root)
        if current != pointer:
            raise superseded(target, current.version if current else None) from None


def _record(target: Target, pointer: Pointer) -> None:
    """Record the publication after its pointer (a run killed between the two leaves a
    published version unrecorded, which the next publication records: history.note)."""
    records = history.read_records(target.root)
    history.note(target.root, records, target.base, pointer.version, target.highest)


@contextlib.contextmanager
def exclusive(root: str):
    """The root's lock, for the pointer's compare-and-write and the clean-up after it; yields
    a function to call before each step under it. On a local disk an exclusive flock, which the
    kernel drops when its holder dies, however it dies; on Cloud Storage the root's lease
    (transforms/storage/leases.py), which a dead holder's expiry frees."""
    if fileio.is_remote(root):
        with leases.held(fileio.join(root, LEASE)) as lease:
            yield lease.check
        return
    check_lock(root)
    descriptor = os.open(os.path.join(root, LOCK), os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield lambda: None
    finally:
        os.close(descriptor)


def finalise(target: Target, moves: list[tuple[str, str]]) -> None:
    """Move staged files into the version: (name in staging, name in the version) pairs, as
    the commit step received them, so a late or duplicate attempt's file (another name in
    staging) is never moved. A file moved already (a retried commit) is left as it is. On an
    object store a move is requests (a copy, a delete), so many go at once: a dataset of 10^8
    images has some 10^5 files to move."""

    def move(pair: tuple[str, str]) -> None:
        source = fileio.join(target.staging, pair[0])
        destination = fileio.join(target.folder, pair[1])
        if not fileio.exists(source) and fileio.exists(destination):
            return
        if not fileio.is_remote(destination):
            os.makedirs(os.path.dirname(destination), exist_ok=True)
        fileio.rename(source, destination)

    if fileio.is_remote(target.folder):
        with ThreadPoolExecutor(REMOTE_MOVES_AT_ONCE, "finalise") as pool:
            list(pool.map(move, moves))
        return
    for pair in moves:
        move(pair)
    for folder in {os.path.dirname(fileio.join(target.folder, final)) for _, final in moves}:
        fileio.sync_file(folder)
    fileio.sync_file(os.path.dirname(target.folder))


def discard(target: Target) -> None:
    """Delete the run's own staging and version folders: after a failure, or a lost race.
    Never a version published once (a retried commit may have published it, and a later run
    replaced it since): recorded, or named by the pointer before its record is written."""
    published, _ = read_pointer(target.root)
    delete_folder(target.root, STAGING, target.version)
    recorded = {record.version for record in history.read_records(target.root)}
    if published and published.version == target.version or target.version in recorded:
        return
    delete_version(target.root, target.version)
