"""One request to Cloud Storage's JSON API on this thread's keep-alive connection
(transforms/storage/connection.py), and what its answer stands for: the one error vocabulary
of every `gs://` request (jsonapi.py's reads, listings, composes, copies and deletions,
uploads.py's uploads).

An answer that is not a success raises FileNotFoundError (404), PermissionError (401, 403),
PreconditionFailedError (412: a generation precondition not met), TransientStoreError (408,
429, 5xx: the service failed, retry.is_transient retries it) or OSError (anything else, the
request's own fault). A body cut short or not matching its checksum is retry.py's
CorruptTransferError; a request still failing after the retries, its StoreUnavailableError.
"""

import contextlib
import http.client
import json
import urllib.parse

from tfrecord_pipeline.transforms.storage import connection as connections

_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})  # as retry.py retries them
_SUCCESS = frozenset({200, 201, 204, 206})


class TransientStoreError(ConnectionError):
    """An answer the service gives when it, not the object, failed (408, 429, 5xx): retried."""


class PreconditionFailedError(OSError):
    """A conditional request (`ifGenerationMatch`) refused: the object's generation is not the
    one asked for (0: the object exists). Not retried: the caller decides what it means (a
    conditional write sent again after its lost answer took effect is refused so too)."""


def object_target(path: str, root: str = "") -> str:
    """The JSON API's address of the object `gs://bucket/name` (`root`: "/upload", "/download")."""
    bucket, name = split(path)
    return f"{root}/storage/v1/b/{quoted(bucket)}/o/{quoted(name)}"


def split(path: str) -> tuple[str, str]:
    bucket, _, name = path.removeprefix("gs://").partition("/")
    return bucket, name


def quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def with_query(target: str, **query: object) -> str:
    """`target` with the query parameters given (those that are None left out)."""
    kept = {key: str(value) for key, value in query.items() if value is not None}
    separator = "&" if "?" in target else "?"
    return f"{target}{separator}{urllib.parse.urlencode(kept)}" if kept else target


@contextlib.contextmanager
def answer(
    target: str,
    path: str,
    headers: dict | None = None,
    method: str = "GET",
    body: dict | bytes | None = None,
    also: frozenset = frozenset(),
):
    """(this thread's connection, the answer to a request of `target`, with `body`, a dict sent
    as JSON, if any) once it is a success (or a status in `also`), its body left to read, the
    connection closed if anything fails meanwhile (`closed_on_failure`)."""
    connection = connections.connection()
    response = sent(connection, method, target, path, headers or {}, body, also)
    with closed_on_failure(connection):
        yield connection, response


def json_answer(target: str, path: str, method: str = "GET", body=None, headers=None) -> dict:
    """The JSON body of the answer to one request (an empty body: {})."""
    with answer(target, path, headers, method, body) as (_, response):
        data = response.read()
    return json.loads(data) if data else {}


@contextlib.contextmanager
def closed_on_failure(connection: http.client.HTTPConnection):
    """`connection` closed if anything fails meanwhile (an answer's body half read, a request
    half sent), so it is never reused in an unknown state."""
    try:
        yield
    except BaseException:
        connection.close()
        raise


def sent(
    connection: http.client.HTTPConnection,
    method: str,
    target: str,
    path: str,
    headers: dict,
    body: dict | bytes | None = None,
    also: frozenset = frozenset(),
) -> http.client.HTTPResponse:
    """The answer to a request on `connection` once it is a success or a status in `also` (else
    the error it stands for); the connection closed on any failure."""
    if isinstance(body, dict):
        body, headers = json.dumps(body).encode(), {**headers, "Content-Type": "application/json"}
    with closed_on_failure(connection):
        response = connections.send(connection, method, target, headers, body)
        if response.status not in also:
            raise_for_status(response, path)
    return response


def raise_for_status(response, path: str) -> None:
    """Nothing for a success; for any other answer, the error it stands for (module docstring)."""
    if response.status in _SUCCESS:
        return
    reason = " ".join(response.read(1000).decode("utf-8", "replace").split())[:200]
    message = f"{response.status} {response.reason}: {reason}"
    if response.status == 404:
        raise FileNotFoundError(2, "no such object", path)
    if response.status in (401, 403):
        raise PermissionError(13, f"permission denied ({message})", path)
    if response.status == 412:
        raise PreconditionFailedError(f"{path}: {message} (a generation precondition)")
    if response.status in _TRANSIENT_STATUS:
        raise TransientStoreError(message)
    raise OSError(f"{path}: {message}")
