"""The one retry layer for Cloud Storage, and its budget.

Every request this project sends to Cloud Storage goes through `retried`: those of jsonapi.py
(an image's media, an object's metadata, a range of a manifest, a page of a listing: what an
existence check and a match ask too; the composes of joins.py, the copies of remote.py,
deletions) and of uploads.py (a whole upload, the dataset's pointer's conditional one among
them; each chunk of a resumable upload, sent on from the offset its session holds), none of
which retries on its own. Another store's requests go through Beam's FileSystems, whose
clients retry them. No request is retried by two layers.

A failure is transient (the service or the network failed: 408, 429, 5xx, a connection reset or
dropped, a timeout, a body cut short or not matching its checksum) or it is the object's (not
found, permission denied, any other answer). A transient failure is retried in place, so what
the run produces never depends on one. The budget: `ATTEMPTS` attempts, `FIRST_DELAY_S` before
the second, doubled after each, jittered (16-32 s of waiting in all), each attempt failed after
`TIMEOUT_S` without an answer: long enough for a blip, a failover or a burst of 429s to pass;
short enough that an object which never answers holds one thread for half a minute, not the two
minutes Google's clients retry a call. A request still failing then raises
`StoreUnavailableError`: the caller decides whether the object or the service is to blame
(gcs.store_answers). docs/guarantees.md tells users the same.
"""

import errno
import random
import time
from collections.abc import Callable
from typing import TypeVar

from tfrecord_pipeline.transforms.errors import FaultError

ATTEMPTS = 7
FIRST_DELAY_S = 0.5
TIMEOUT_S = 60  # a request that hears nothing for this long has failed (transiently)
# What a socket raises, as a plain OSError, when the network (not the store) fails on the way.
_NETWORK_ERRNOS = frozenset(
    {errno.ENETDOWN, errno.ENETUNREACH, errno.EHOSTDOWN, errno.EHOSTUNREACH}
)
_T = TypeVar("_T")


class StoreUnavailableError(FaultError):
    """A request to an object store still failed transiently after every retry."""


class CorruptTransferError(ConnectionError):
    """A body that does not match the checksum the response announced: cut short or damaged
    on the way, so the next attempt may get it whole."""


def is_transient(error: BaseException) -> bool:
    """Whether `error`, raised by a request, is the service's or the network's failure (worth
    another attempt) rather than the object's: the statuses and failures Google's storage
    client retries (google.cloud.storage.retry), as answers.py raises them, and a body that
    does not match its checksum. requests' and urllib3's are those of refreshing a token
    (google-auth sends that request through requests)."""
    import http.client  # here, not for every local run that never meets an object store
    import socket
    import ssl

    import requests
    import urllib3
    from google.auth import exceptions as auth

    if isinstance(error, auth.RefreshError):  # the token endpoint answered 5xx, 408 or 429
        return error.retryable
    if isinstance(error, auth.TransportError):  # refreshing a token failed on the way
        return bool(error.args) and is_transient(error.args[0])
    if isinstance(error, ssl.SSLError):  # a TLS record cut or garbled on the way
        return not isinstance(error, ssl.SSLCertVerificationError)
    if isinstance(error, socket.gaierror) or getattr(error, "errno", None) in _NETWORK_ERRNOS:
        return True  # DNS or a route failing on the way: requests' ConnectionError, retried
    return isinstance(
        error,
        (
            ConnectionError,  # CorruptTransferError, resets, refusals
            TimeoutError,
            http.client.HTTPException,  # IncompleteRead, BadStatusLine, ...
            requests.ConnectionError,  # requests' own, not the built-in one
            requests.exceptions.ChunkedEncodingError,
            requests.Timeout,
            urllib3.exceptions.ProtocolError,
            urllib3.exceptions.TimeoutError,
            urllib3.exceptions.SSLError,
            urllib3.exceptions.PoolError,
        ),
    )


def backoff_s(attempt: int) -> float:
    """The wait after failed attempt `attempt` (from 0), jittered to between half and all of
    the doubling schedule, so retries of many threads do not arrive together."""
    return FIRST_DELAY_S * 2**attempt * random.uniform(0.5, 1.0)


def retried(request: Callable[[], _T], what: str) -> _T:
    """`request()`, attempted again after each transient failure; StoreUnavailableError once
    `ATTEMPTS` have failed. Any other failure is raised at once."""
    start = time.monotonic()
    for attempt in range(ATTEMPTS):
        try:
            return request()
        except Exception as error:
            if not is_transient(error):
                raise
            if attempt == ATTEMPTS - 1:
                message = " ".join(str(error).split()) or type(error).__name__
                raise StoreUnavailableError(
                    f"Cloud Storage kept failing a request for {what} ({message}) through "
                    f"{ATTEMPTS} attempts over {time.monotonic() - start:.0f} s; "
                    "rerun the same command"
                ) from error
        time.sleep(backoff_s(attempt))
    raise AssertionError("unreachable")
