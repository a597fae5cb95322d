"""A run's claim on its own folders: while it lives, no clean-up deletes its staging or version
folder, even once another run's publication means it can no longer publish (it finds that out
at its own publication, exit 4, and deletes its folders itself).

The claim is `_staging/<version>.live`, made before the run writes anything. On a local disk
it is a file the run holds a shared lock on (flock) for as long as its process lives: the
kernel lets go of it however the run dies, so a clean-up that can lock it exclusively knows the
run is gone. On Cloud Storage it is a lease (transforms/storage/leases.py) the run renews while
it lives, which expires a minute after a killed run's last renewal. A Dataflow job outlives the
command that submitted it, and nothing renews its lease: it is written to hold for
`DETACHED_SECONDS` instead, longer than a batch job of this tool runs; a job cancelled leaves
its folders to the first clean-up after that.
"""

import contextlib
import fcntl
import os

from tfrecord_pipeline.dataset.versions import STAGING
from tfrecord_pipeline.transforms.storage import fileio, leases

SUFFIX = ".live"
DETACHED_SECONDS = 48 * 3600


def claim_path(root: str, version: str) -> str:
    return fileio.join(root, STAGING, version + SUFFIX)


def claimed_version(name: str) -> str | None:
    """The version a name in `_staging/` claims, or None when it is not a claim."""
    return name.removesuffix(SUFFIX) if name.endswith(SUFFIX) else None


@contextlib.contextmanager
def claimed(root: str, version: str, detached: bool = False):
    """Claim `version`'s folders for the block: locally a lock held until it ends (or the
    process dies), on Cloud Storage a lease renewed until then and given back; `detached`
    (a Dataflow job's), a lease of DETACHED_SECONDS left for the job's lifetime."""
    path = claim_path(root, version)
    if fileio.is_remote(root):
        if not detached:
            with leases.held(path):
                yield
            return
        leases.take(path, DETACHED_SECONDS)
        try:
            yield
        except BaseException:  # the job was never submitted: nothing to hold for it
            drop(root, version)
            raise
        return
    descriptor = _created(path)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH)
        yield
    finally:
        with contextlib.suppress(OSError):  # gone, or its file system failing: a later clean-up's
            os.remove(path)
        os.close(descriptor)


def _created(path: str) -> int:
    """The local claim file, opened to be locked, never written (a file open for writing would
    keep its file system from being remounted read-only under the run), in a `_staging/` a run
    stopped by a mistake may be removing meanwhile (then made again: layout.unmake_layout)."""
    while True:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            return os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except FileNotFoundError:
            continue


def is_live(root: str, version: str) -> bool:
    """Whether the run of `version` holds its claim still (a run from before claims holds
    none: it is taken as gone)."""
    path = claim_path(root, version)
    if fileio.is_remote(root):
        return leases.is_live(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # none, or a link (never followed): no run's
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def drop(root: str, version: str) -> None:
    """Delete the claim of a run found gone."""
    fileio.delete([claim_path(root, version)])
