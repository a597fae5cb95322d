"""A run's writes and their publication: its own version and staging folders, the pointer's
one atomic write, and the clean-up after it (the layout: pipeline/dataset/versions.py).

A run writes only into its own version and staging folders, named by a random id, so nothing it
does (killed, retried, orphaned, racing another run) can touch a byte another run wrote. Its
version becomes visible in one atomic step, the pointer's write, made only if the pointer still
names the version the run started from: under an exclusive lock on a local disk (write, fsync,
rename), with a generation precondition on Cloud Storage. Of two runs started from the same
version one publishes and the other is told so (SupersededError).
"""

import contextlib
import dataclasses
import fcntl
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pipeline.dataset.versions import (
    MARKER,
    POINTER,
    STAGING,
    VERSIONS,
    Pointer,
    sequence,
)
from transforms.errors import FaultError, UserError
from transforms.storage import fileio, gcs
from transforms.storage.retry import TIMEOUT_S, retried

LOCK = ".lock"
_OURS = (POINTER, VERSIONS, STAGING, LOCK)
REMOTE_MOVES_AT_ONCE = 64


class SupersededError(FaultError):
    """Another run published a version of the same dataset while this one ran."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where one run writes: its version of the dataset at `root`, decided before any work."""

    root: str
    version: str
    base: Pointer | None  # the version published when the run started; None for the first
    base_generation: int = 0  # Cloud Storage's generation of that pointer (0: there was none)

    @property
    def folder(self) -> str:
        return fileio.join(self.root, VERSIONS, self.version)

    @property
    def staging(self) -> str:
        return fileio.join(self.root, STAGING, self.version)


def start(root: str) -> Target:
    """A new version of the dataset at `root`, for a run starting now. A folder that is not
    one of this tool's datasets is refused (UserError): nothing in it is ever touched."""
    try:
        fileio.check_writable_folder(root)
        _refuse_foreign(root, fileio.names_in(root))
        base, generation = read_pointer(root)
    except fileio.UNAVAILABLE:
        raise  # the service's failure, not the output's: a fault
    except fileio.READ_ERRORS as error:
        raise UserError(f"--output {root}: cannot write there ({error})") from None
    number = sequence(base.version) + 1 if base else 1
    return Target(root, f"v{number:06d}-{os.urandom(4).hex()}", base, generation)


def _refuse_foreign(root: str, names: list[str]) -> None:
    foreign = [
        name for name in names if name not in _OURS and not name.startswith(f"{POINTER}.tmp-")
    ]
    if not foreign:
        return
    parent = root.rstrip("/").replace("\\", "/").split("/")[-2:-1]
    if MARKER in foreign and parent == [VERSIONS]:
        raise UserError(f"{root} is a version of a dataset; --output names the dataset's root")
    if MARKER in foreign:
        raise UserError(
            f"{root} holds a dataset in the single-folder layout of tfrecord-pipeline 0.1; "
            "convert into a new --output folder (nothing in that one is changed)"
        )
    shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
    raise UserError(
        f"{root} is not empty and is not a tfrecord-pipeline dataset (it holds {shown}); "
        "name a new or empty folder for --output"
    )


def read_pointer(root: str) -> tuple[Pointer | None, int]:
    """The published version's pointer (None before the first), and on Cloud Storage the
    pointer object's generation, which a publication must find unchanged."""
    path = fileio.join(root, POINTER)
    if not fileio.is_remote(root):
        if not os.path.exists(path):
            return None, 0
        return Pointer.parse(fileio.read_bytes(path), path), 0
    read = gcs.read_generation(path)
    return (Pointer.parse(read[0], path), read[1]) if read else (None, 0)


def _blob(path: str):
    bucket, name = gcs.split(path)
    return gcs.client().bucket(bucket).blob(name)


def superseded(target: Target, current: Pointer | None) -> SupersededError:
    now = current.version if current else "nothing"
    return SupersededError(
        f"another run published {now} in {target.root} while this one ran, so this run's "
        f"{target.version} was not published; rerun to convert again from {now}"
    )


def published_since(target: Target) -> Pointer | None:
    """The version another run published since `target`'s run started, if one did."""
    current, _ = read_pointer(target.root)
    if current in (None, target.base) or current.version == target.version:
        return None
    return current


def publish(target: Target, pointer: Pointer) -> None:
    """Make `pointer` the published version in one atomic write, if the published version is
    still the run's base; raises SupersededError if another run published meanwhile. Asking
    again after success (a retried commit) succeeds."""
    path = fileio.join(target.root, POINTER)
    if fileio.is_remote(path):
        from google.api_core.exceptions import PreconditionFailed

        def upload() -> None:  # sent again after it took effect, it is refused (412)
            _blob(path).upload_from_string(
                pointer.to_bytes(),
                content_type="application/json",
                if_generation_match=target.base_generation,
                retry=None,
                timeout=TIMEOUT_S,
            )

        try:
            retried(upload, path)
        except PreconditionFailed:
            current, _ = read_pointer(target.root)
            if current != pointer:
                raise superseded(target, current) from None
        return
    with _locked(target.root):
        current, _ = read_pointer(target.root)
        if current == pointer:
            return
        if current != target.base:
            raise superseded(target, current)
        fileio.write_durably(path, pointer.to_bytes())


@contextlib.contextmanager
def _locked(root: str):
    """An exclusive lock on the root, for the pointer's compare-and-write. The kernel drops it
    when its holder dies, however it dies."""
    descriptor = os.open(os.path.join(root, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
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
    Never the published version (a retried commit may already have published it)."""
    published, _ = read_pointer(target.root)
    fileio.delete_tree(target.staging)
    if not published or published.version != target.version:
        _delete_version(target.root, target.version)


def _delete_version(root: str, version: str) -> None:
    """Marker first: a version half deleted is never taken for a complete one."""
    folder = fileio.join(root, VERSIONS, version)
    fileio.delete([fileio.join(folder, MARKER)])
    fileio.delete_tree(folder)


def clean_up(root: str, published: Pointer, keep_versions: int) -> None:
    """After `published` was published: delete what no run can publish any more (staging and
    unfinished versions numbered up to it: their runs started from an older version; and
    complete versions numbered as it is: their runs started from the version it replaced, so
    they lost to it or died before publishing), and with `keep_versions`, the complete versions
    beyond the newest K."""
    last = sequence(published.version)
    for name in fileio.names_in(fileio.join(root, STAGING)):
        if sequence(name) <= last:
            _tidy(fileio.delete_tree, fileio.join(root, STAGING, name))
    complete = []
    for name in fileio.names_in(fileio.join(root, VERSIONS)):
        if name == published.version or not 0 < sequence(name) <= last:
            continue
        if sequence(name) < last and fileio.exists(fileio.join(root, VERSIONS, name, MARKER)):
            complete.append(name)
        else:
            _tidy(_delete_version, root, name)
    if keep_versions:
        complete.sort(key=sequence, reverse=True)
        for name in complete[keep_versions - 1 :]:
            _tidy(_delete_version, root, name)


def _tidy(delete: Callable[..., None], *args: str) -> None:
    """One deletion of the clean-up, which may fail: the version is published by then, and
    another run deleting its own folder, or still writing in it, can make the deletion fail
    (a file gone or added under it): what is left, a later run's clean-up deletes."""
    with contextlib.suppress(OSError):
        delete(*args)
