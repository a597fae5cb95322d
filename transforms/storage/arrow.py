"""pyarrow's C++ Cloud Storage client (`pyarrow.fs.GcsFileSystem`), for the requests a run sends
besides its image reads that it can make: uploads (transforms/storage/remote.py).

Beam's gcsio spends several times this client's CPU on the same request, on a streamed upload
some sixty times (benchmarks/gcs_request_cost.py), and on Dataflow CPU is the bill. Pyarrow is
already installed (Beam depends on it). The rest goes elsewhere: its stats and listings carry
no CRC-32C (an object's identity, gcs.identity), it has no compose, its copy_file first reads
a page of the destination folder's listing (remote.copy), and its deletions and stats may send
a request again within the call (jsonapi.py sends those).

One client a process, re-made after a fork (its connections are not to be shared with a
parent) and when STORAGE_EMULATOR_HOST changes. Its own retries are off for a whole upload:
its retry policy is limited to the least time it takes (a second; 0 sends nothing), and an
upload failed by a 503 or a dropped connection is then sent once an attempt of `retried`
(tests/test_remote.py counts them), its error raised within a second or two, so transforms/
storage/retry.py `retried` is the one retry layer. A streamed upload, which no loop around
it can send again, is the exception: its client retries its own chunks within the same budget
(`upload_filesystem`).
"""

import datetime
import functools
import os

from tfrecord_pipeline.transforms.storage.retry import (
    CorruptTransferError,
    StoreUnavailableError,
    retried,
)

_ONE_ATTEMPT = datetime.timedelta(seconds=1)  # the least it takes; it ignores fractions
# A streamed upload's chunks are retried by its client for as long as `retried` waits at most.
_UPLOAD_BUDGET = datetime.timedelta(seconds=32)
_TRANSIENT = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "INTERNAL", "ABORTED")


class TransientArrowError(ConnectionError):
    """A request the service or the network failed (retry.is_transient retries it)."""


def filesystem():
    """This process's client, its retries off."""
    return _filesystem(os.getpid(), os.environ.get("STORAGE_EMULATOR_HOST"), _ONE_ATTEMPT)


def upload_filesystem():
    """This process's client for streamed uploads, retrying its own chunks (module docstring)."""
    return _filesystem(os.getpid(), os.environ.get("STORAGE_EMULATOR_HOST"), _UPLOAD_BUDGET)


@functools.cache
def _filesystem(pid: int, emulator: str | None, retry_limit: datetime.timedelta):
    """A client pointed at the emulator `emulator` names (anonymous, http), else at Cloud
    Storage with Google's default credentials; one per process (`pid`) and address."""
    from pyarrow import fs

    if not emulator:
        return fs.GcsFileSystem(retry_time_limit=retry_limit)
    scheme, _, host = emulator.rpartition("://")
    return fs.GcsFileSystem(
        anonymous=True,
        endpoint_override=host.rstrip("/"),
        scheme=scheme or "http",
        retry_time_limit=retry_limit,
    )


def path_of(gs_path: str) -> str:
    """`gs://bucket/name` as pyarrow names it: `bucket/name`."""
    return gs_path.removeprefix("gs://")


def as_python(error: OSError, path: str) -> BaseException:
    """The built-in exception a pyarrow error stands for: FileNotFoundError, PermissionError, a
    transient ConnectionError (the service's or the network's failure; DATA_LOSS, a body not
    matching its checksum, among them) or the error itself (the request's own fault)."""
    if isinstance(error, (FileNotFoundError, PermissionError)):
        return error
    message = " ".join(str(error).split())
    if "NOT_FOUND" in message:
        return FileNotFoundError(2, "no such object", path)
    if "PERMISSION_DENIED" in message or "UNAUTHENTICATED" in message:
        return PermissionError(13, f"permission denied ({message[:200]})", path)
    if "DATA_LOSS" in message:
        return CorruptTransferError(f"{path}: {message[:200]}")
    if any(f"{status}:" in message for status in _TRANSIENT):
        return TransientArrowError(f"{path}: {message[:200]}")
    return error


def call(request, path: str):
    """`request()`, its pyarrow error raised as `as_python` tells it."""
    try:
        return request()
    except OSError as error:
        raised = as_python(error, path)
        if raised is error:
            raise
        raise raised from None


def upload(path: str, data: bytes) -> None:
    """The object `gs://bucket/name` holding `data`, whole or not at all: one upload, sent again
    whole after a transient failure (an upload whose answer was lost makes the same object)."""
    store = filesystem()

    def send() -> None:
        stream = store.open_output_stream(path_of(path))
        stream.write(data)  # held in memory until the close sends it
        stream.close()

    retried(lambda: call(send, path), path)


class Upload:
    """A streamed upload of the object `gs://bucket/name`, made when it is closed; its chunks
    retried by its client (`upload_filesystem`), a transient failure left after them raised as
    StoreUnavailableError, as any request that kept failing."""

    def __init__(self, path: str):
        self._path = path
        store = upload_filesystem()
        self._stream = self._sent(lambda: store.open_output_stream(path_of(path)))

    def write(self, data) -> int:
        return self._sent(lambda: self._stream.write(data))

    def flush(self) -> None:
        self._sent(self._stream.flush)

    def close(self) -> None:
        self._sent(self._stream.close)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _sent(self, request):
        try:
            return call(request, self._path)
        except TransientArrowError as error:
            message = f"Cloud Storage kept failing the upload of {self._path} ({error})"
            raise StoreUnavailableError(message) from error
