"""Faults: failures a run cannot survive and a rerun usually can, told apart from bugs.

A fault is neither the input's nor the code's doing: the disk filled up or turned read-only, the
device failed, a shard-writer process was killed, Google Cloud refused (quota, 429) or failed
(5xx) a request until its client stopped retrying, or another run committed the same output.
The command prints a fault as one line that names the cause and what to do, and exits with
status 3; the traceback goes to a log file, or with --debug to stderr. Missing Google credentials
are no fault but the user's to set up: one line too, exit status 2. Any other exception is a
bug, and keeps its traceback; the command exits with a status of its own (70), never Python's
1, which a scheduler would read as a version the quality gates kept from publishing.
"""

import errno
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator

from tfrecord_pipeline.transforms.errors import FaultError, beams_original

_RERUN = "then rerun the same command"
_DISK_FAULTS = {
    errno.ENOSPC: f"no space left on the device{{at}}; free some space, {_RERUN}",
    errno.EDQUOT: f"disk quota exceeded{{at}}; free some space or raise the quota, {_RERUN}",
    errno.EROFS: f"the file system{{at}} is read-only; make it writable, {_RERUN}",
    errno.EIO: f"input/output error from the device{{at}}; check the device, {_RERUN}",
}


def as_fault(error: BaseException) -> FaultError | None:
    """The fault `error` is, or was caused by (Beam re-raises a step's exception in a wrapper
    of its own); None for a bug."""
    for link in _causes(error):
        if isinstance(link, FaultError):
            return beams_original(link)
        if isinstance(link, OSError) and link.errno in _DISK_FAULTS:
            at = f" ({link.filename})" if link.filename else ""
            return FaultError(_DISK_FAULTS[link.errno].format(at=at))
        if fault := _cloud_fault(link):
            return fault
    return None


def _causes(error: BaseException | None) -> Iterator[BaseException]:
    """`error`, then what it was raised from or while handling, and so on (as a traceback
    shows them: `raise ... from None` ends the chain)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)


def _cloud_fault(error: BaseException) -> FaultError | None:
    """A Google Cloud request that failed on the service's side even after its retries, sent
    by Beam's own clients (the project's own Cloud Storage requests raise FaultErrors): Google's
    API errors (Beam's gcsio, as it stages a Dataflow job) or a Dataflow API call's. Their
    types are looked up among the loaded modules: an error of a module never imported cannot
    have been raised."""
    apitools = sys.modules.get("apitools.base.py.exceptions")  # Dataflow job submission
    api = sys.modules.get("google.api_core.exceptions")
    if apitools and isinstance(error, apitools.HttpError):
        status = error.status_code
        if status != 429 and not 500 <= status < 600:
            return None
    elif api and isinstance(
        error, (api.TooManyRequests, api.ResourceExhausted, api.ServerError, api.RetryError)
    ):
        status = getattr(error, "code", None)
    else:
        return None
    text = " ".join(str(error).split())
    if status == 429:  # also gRPC's RESOURCE_EXHAUSTED
        return FaultError(
            f"Google Cloud refused a request over a quota or rate limit, retries included "
            f"({text}); wait or raise the quota, {_RERUN}"
        )
    return FaultError(f"Google Cloud kept failing a request, retries included ({text}); {_RERUN}")


_LOGIN = "gcloud auth application-default login"


def missing_credentials(error: BaseException) -> str | None:
    """The line for a `gs://` path reached without Google credentials (google-auth found none,
    or not the file GOOGLE_APPLICATION_CREDENTIALS names): the user's to set up, so not a
    fault. The error's type is looked up among the loaded modules, as `_cloud_fault`'s."""
    auth = sys.modules.get("google.auth.exceptions")
    missing = auth and next(
        (link for link in _causes(error) if isinstance(link, auth.DefaultCredentialsError)), None
    )
    if not missing:
        return None
    named = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if named and not os.path.isfile(named):
        return (
            f"GOOGLE_APPLICATION_CREDENTIALS names {named}, which is not a file: point it at a "
            f"service account's key file, or unset it and run '{_LOGIN}'"
        )
    if named:
        return (
            f"GOOGLE_APPLICATION_CREDENTIALS names {named}, which holds no credentials "
            f"({' '.join(str(missing).split())}): point it at a service account's key file, or "
            f"unset it and run '{_LOGIN}'"
        )
    return (
        f"no Google Cloud credentials, which gs:// paths need: run '{_LOGIN}', or set "
        "GOOGLE_APPLICATION_CREDENTIALS to a service account's key file"
    )


def report_fault(fault: FaultError, error: BaseException, debug: bool) -> str:
    """The one line that reports `fault`. The traceback of `error` is printed first with
    `debug`, else written to a log file the line names."""
    line = " ".join(str(fault).split())
    if debug:
        traceback.print_exception(error)
        return line
    try:
        with tempfile.NamedTemporaryFile(
            "w", prefix="tfrecord-pipeline-", suffix=".log", delete=False
        ) as log:
            traceback.print_exception(error, file=log)
    except OSError:  # the temporary folder's disk may be the full one
        return f"{line} (rerun with --debug for the traceback)"
    return f"{line} (traceback in {log.name})"


def bug_reported(command: Callable[[], int], status: int) -> int:
    """`command`'s exit status; a bug it raises printed with its traceback, then `status`."""
    try:
        return command()
    except Exception:  # noqa: BLE001 - anything main() lets out is a bug
        traceback.print_exc()
        print(
            "tfrecord-pipeline: internal error: a bug, not your input; please report it with the"
            " traceback above",
            file=sys.stderr,
        )
        return status
