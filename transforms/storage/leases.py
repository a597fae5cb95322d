"""Leases on Cloud Storage objects: what a bucket has in place of a local disk's lock, made of
the store's own primitives, a write made only if the object's generation is the one given.

A lease is an object whose body names its holder, how many times the holder renewed it, and
for how many seconds it holds from its last write. It is taken by creating the object only if
there is none (generation 0), renewed by rewriting it only if its generation is the holder's
last, and given back by deleting that generation alone. One left by a holder that died (killed,
its machine gone) expires once the store's clock says it was written longer ago than its
seconds (jsonapi.stamped: no machine's clock is trusted), and is then taken over by rewriting
exactly the generation found expired, so of two takers one wins. A write whose answer was lost
is sent again and refused (412): the lease found then is the taker's own when its body names
this holder and renewal.

A holder acts under its lease only while it holds it by its own reckoning: until `seconds`
less a third since it sent its last write (the store wrote it later, so the lease lasts at
least that long by the store's clock); `Lease.check` raises LeaseLostError after that, and a
thread renews the lease every sixth of its seconds while it is held (`held`). The writes that
matter under a lease carry generation preconditions of their own (the dataset's pointer), so a
holder that lost its lease unawares cannot overwrite another's publication.
"""

import contextlib
import json
import logging
import os
import random
import threading
import time
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import FaultError
from tfrecord_pipeline.transforms.storage import gcs, jsonapi
from tfrecord_pipeline.transforms.storage.answers import PreconditionFailedError
from tfrecord_pipeline.transforms.storage.retry import retried

# How long a lease holds after its last write: a dead holder's is taken over this long after
# it last renewed it. The environment variable exists for tests that kill a holder.
LEASE_SECONDS = float(os.environ.get("TFRECORD_PIPELINE_LEASE_SECONDS", "60"))
_POLL_S = 1.0  # the longest wait between two looks at a lease another holds
_log = logging.getLogger(__name__)


class LeaseLostError(FaultError):
    """A lease expired, or was taken over, while its holder still worked under it."""


class Found(NamedTuple):
    """A lease as the store holds it: who holds it, and whether that is over."""

    holder: str
    renewal: int
    seconds: float
    generation: int
    age_s: float

    @property
    def expired(self) -> bool:
        return self.age_s > self.seconds


def found(path: str) -> Found | None:
    """The lease at `path` as it is now, or None when there is none (or its body is not a
    lease's: then it is taken as expired)."""
    while True:
        try:
            stamp = retried(lambda: jsonapi.stamped(path), path)
            media = retried(lambda: jsonapi.media(path, None, stamp.generation), path)  # noqa: B023
        except FileNotFoundError:
            return None
        try:
            body = json.loads(media.data)
            return Found(
                body["holder"], body["renewal"], body["seconds"], stamp.generation, stamp.age_s
            )
        except (ValueError, TypeError, KeyError):
            return Found("", 0, 0.0, stamp.generation, stamp.age_s)


class Lease:
    """A lease this process holds: `check` before each step taken under it."""

    def __init__(self, path: str, seconds: float):
        self.path, self.seconds = path, seconds
        self.holder = os.urandom(8).hex()
        self.renewal, self.generation, self.sent_at = 0, 0, 0.0
        self.lost = False

    def body(self, renewal: int) -> bytes:
        fields = {"holder": self.holder, "renewal": renewal, "seconds": self.seconds}
        return json.dumps(fields, sort_keys=True).encode()

    def write(self, expected_generation: int) -> bool:
        """Write the lease's next renewal over `expected_generation` (0: none); whether it
        was made (a lost answer's write found to be this holder's counts as made)."""
        renewal, sent_at = self.renewal + 1, time.monotonic()
        try:
            generation = gcs.write(self.path, self.body(renewal), expected_generation)
        except PreconditionFailedError:
            now = found(self.path)
            if now is None or (now.holder, now.renewal) != (self.holder, renewal):
                return False
            generation = now.generation
        self.renewal, self.generation, self.sent_at = renewal, generation, sent_at
        return True

    def check(self) -> None:
        """LeaseLostError once this process no longer holds the lease by its own reckoning."""
        left = self.sent_at + self.seconds * 2 / 3 - time.monotonic()
        if self.lost or left <= 0:
            raise LeaseLostError(
                f"the lease {self.path} lapsed (Cloud Storage kept failing its renewal, or "
                "another process took it over); nothing more was changed: rerun the same command"
            )


def take(path: str, seconds: float = LEASE_SECONDS) -> Lease:
    """The lease at `path`, once it is free or its holder's has expired: waits meanwhile."""
    lease = Lease(path, seconds)
    said = False
    while True:
        if lease.write(0):
            return lease
        other = found(path)
        if other is not None and other.expired and lease.write(other.generation):
            _log.info("took over %s, %.0f s after its holder's last write", path, other.age_s)
            return lease
        if other is not None and not said:
            said = True
            _log.info("waiting for %s, held by another process", path)
        time.sleep(random.uniform(0.2, 1.0) * _POLL_S)


def renew(lease: Lease) -> None:
    """Rewrite the lease over its last generation; marks it lost when another holds it now."""
    if not lease.write(lease.generation):
        lease.lost = True


def give_back(lease: Lease) -> None:
    """Delete the lease's own generation (another's, taken over since, is left)."""
    with contextlib.suppress(FileNotFoundError, PreconditionFailedError):
        retried(lambda: jsonapi.delete(lease.path, lease.generation), lease.path)


@contextlib.contextmanager
def held(path: str, seconds: float = LEASE_SECONDS):
    """The lease at `path`, renewed every sixth of its seconds until the block ends, then
    given back; yields the Lease, whose `check` the block calls before each step."""
    lease = take(path, seconds)
    done = threading.Event()

    def renewing() -> None:
        while not done.wait(seconds / 6) and not lease.lost:
            with contextlib.suppress(Exception):  # a failing store: `check` tells in time
                renew(lease)

    thread = threading.Thread(target=renewing, name="lease", daemon=True)
    thread.start()
    try:
        yield lease
    finally:
        done.set()
        thread.join()
        give_back(lease)


def is_live(path: str) -> bool:
    """Whether a lease at `path` is held and not expired."""
    lease = found(path)
    return lease is not None and not lease.expired
