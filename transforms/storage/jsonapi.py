"""The requests a run sends Cloud Storage's JSON API itself, each one request on this thread's
keep-alive connection (transforms/storage/connection.py): an image's media (once an image),
an object's metadata (a refresh's and a plan's stat of an image), a page of a listing (with
each object's size and CRC-32C for a refresh's identities), a shard's compose, a server-side
copy, a deletion; and ranges of a manifest, streamed on a connection of their reader's own.

Google's Python client spends four to five times the CPU of the work itself on a request
(benchmarks/gcs_read_cost.py, benchmarks/gcs_request_cost.py): requests' session,
google-resumable-media's download machinery, reading proxy settings from the environment for
every request. On Dataflow CPU is the bill. The standard library's http.client does the same
request for less than Arrow's C++ client does, and leaves every decision here, where the
project makes it: one request, no retry of its own (transforms/storage/retry.py is the one
retry layer), a timeout on each wait, a body checked against the CRC-32C its response
announces.
"""

import contextlib
import http.client
import json
import urllib.parse
from typing import NamedTuple

from tfrecord_pipeline.transforms.storage import connection as connections
from tfrecord_pipeline.transforms.storage.retry import CorruptTransferError
from tfrecord_pipeline.transforms.tfrecord.records import crc32c_of

_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})  # as retry.py retries them


class TransientStoreError(ConnectionError):
    """An answer the service gives when it, not the object, failed (408, 429, 5xx): retried."""


class Media(NamedTuple):
    data: bytes
    crc32c: str  # base64, as Cloud Storage gives it


def media(path: str, max_bytes: int | None) -> Media | None:
    """The bytes of the object `gs://bucket/name` from one GET of its media, checked against
    the CRC-32C its response announces; None when it holds more than `max_bytes` (then its
    body is never read). A missing object raises FileNotFoundError; one the caller may not
    read, PermissionError; a failure of the service or the network, an exception
    retry.is_transient retries. Not retried here, as nothing in this module is."""
    with _answer(_object(path, "/download") + "?alt=media", path) as (connection, response):
        size = response.getheader("Content-Length")
        if max_bytes is not None and size is not None and int(size) > max_bytes:
            connection.close()  # the body is left unread: the connection cannot be reused
            return None
        data = response.read() if max_bytes is None else response.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:
            connection.close()
            return None
        if size is not None and len(data) != int(size):  # read(n) tells no cut: its length does
            raise CorruptTransferError(f"{path}: {len(data):,} of {int(size):,} bytes")
    crc32c = crc32c_of(data)
    announced = _announced_crc32c(response.getheader("X-Goog-Hash", ""))
    if announced is not None and announced != crc32c:
        raise CorruptTransferError(f"{path}: {len(data):,} bytes not matching X-Goog-Hash")
    return Media(data, crc32c)


def media_from(
    connection: http.client.HTTPConnection, path: str, start: int, end: int
) -> http.client.HTTPResponse:
    """The answer to one ranged GET of an object's bytes `start` to `end` (exclusive) on
    `connection`, its body left for the caller to read as it needs (a range may be large).
    A server that ignores the Range (a proxy in the way) and answers the whole object raises
    OSError, its body unread: those are not the bytes asked for."""
    headers = {"Range": f"bytes={start}-{end - 1}"}
    response = _sent(connection, "GET", _object(path, "/download") + "?alt=media", path, headers)
    if response.status != 206 and (start, response.length) != (0, end - start):
        connection.close()
        raise OSError(f"{path}: the whole object answered a Range of bytes {start:,}-{end:,}")
    return response


def media_range(path: str, start: int, end: int) -> bytes:
    """Bytes `start` to `end` (exclusive) of an object, from one ranged GET on this thread's
    connection (a record, a footer: small enough to read at once)."""
    connection = connections.connection()
    with _closed_on_failure(connection):
        return media_from(connection, path, start, end).read()


def metadata(path: str) -> dict:
    """An object's size, CRC-32C and generation (its metadata's own names and strings)."""
    fields = "?fields=size%2Ccrc32c%2Cgeneration"
    with _answer(_object(path) + fields, path) as (_, response):
        return json.loads(response.read())


class Page(NamedTuple):
    names: list[str]
    prefixes: list[str]
    next_token: str | None
    sizes: list[int | None] | tuple = ()  # the names' sizes (None: not said), in their order
    crc32cs: list[str] | tuple = ()  # and their CRC-32Cs ("": not said)


def list_page(
    bucket: str, prefix: str, delimiter: str, token: str | None, max_results: int | None
) -> Page:
    """One page of the names in `bucket` starting with `prefix` (and, with a `delimiter`, the
    prefixes ending at it), and the token of the next page (None after the last)."""
    query = {"prefix": prefix, "fields": "items(name,size,crc32c),prefixes,nextPageToken"}
    query.update({"delimiter": delimiter} if delimiter else {})
    query.update({"maxResults": str(max_results)} if max_results else {})
    page = _listing(bucket, query, token)
    items = page.get("items", ())
    names = [item["name"] for item in items]
    sizes = [int(item["size"]) if "size" in item else None for item in items]
    crc32cs = [item.get("crc32c", "") for item in items]
    return Page(names, page.get("prefixes", []), page.get("nextPageToken"), sizes, crc32cs)


class Listed(NamedTuple):
    name: str
    size: int
    crc32c: str  # base64, as Cloud Storage gives it


def listed_objects(
    bucket: str, prefix: str, first: str, token: str | None
) -> tuple[list[Listed], str | None]:
    """One page (of up to a thousand) of the objects directly under `prefix` (not in its
    subfolders), from the name `first` on, with their sizes and CRC-32Cs; the next page's
    token (None after the last)."""
    fields = "items(name,size,crc32c),nextPageToken"
    query = {"prefix": prefix, "delimiter": "/", "startOffset": first, "fields": fields}
    page = _listing(bucket, {**query, "maxResults": "1000"}, token)
    objects = [Listed(o["name"], int(o["size"]), o["crc32c"]) for o in page.get("items", ())]
    return objects, page.get("nextPageToken")


def _listing(bucket: str, query: dict[str, str], token: str | None) -> dict:
    query = {**query, "pageToken": token} if token else query
    target = f"/storage/v1/b/{_quoted(bucket)}/o?{urllib.parse.urlencode(query)}"
    with _answer(target, f"gs://{bucket}/{query['prefix']}") as (_, response):
        return json.loads(response.read())


def compose(sources: list[str], destination: str) -> str:
    """Makes `destination` of objects `sources` (in its bucket), one after another, with one
    compose request; the CRC-32C of the whole, as the answer gives it."""
    parts = [{"name": _split(source)[1]} for source in sources]
    body = {"sourceObjects": parts, "destination": {"name": _split(destination)[1]}}
    target = _object(destination) + "/compose?fields=crc32c"
    with _answer(target, destination, method="POST", body=body) as (_, response):
        return json.loads(response.read())["crc32c"]


def copy(source: str, destination: str) -> None:
    """Copies an object within the store (which checks its CRC-32C) with one copy request."""
    target = f"{_object(source)}/copyTo{_object(destination).removeprefix('/storage/v1')}"
    with _answer(target + "?fields=name", source, method="POST") as (_, response):
        response.read()


def delete(path: str) -> None:
    """Deletes an object with one DELETE; FileNotFoundError when there is none."""
    with _answer(_object(path), path, method="DELETE") as (_, response):
        response.read()


def _object(path: str, root: str = "") -> str:
    bucket, name = _split(path)
    return f"{root}/storage/v1/b/{_quoted(bucket)}/o/{_quoted(name)}"


def _split(path: str) -> tuple[str, str]:
    bucket, _, name = path.removeprefix("gs://").partition("/")
    return bucket, name


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


@contextlib.contextmanager
def _answer(
    target: str,
    path: str,
    headers: dict | None = None,
    method: str = "GET",
    body: dict | None = None,
):
    """(this thread's connection, the answer to a request of `target`, with `body` as JSON if
    any) once it is a success, its body left to read, the connection closed if anything fails
    meanwhile (`_closed_on_failure`). An answer that is not a success raises as
    `_raise_for_status` tells."""
    connection = connections.connection()
    response = _sent(connection, method, target, path, headers or {}, body)
    with _closed_on_failure(connection):
        yield connection, response


@contextlib.contextmanager
def _closed_on_failure(connection: http.client.HTTPConnection):
    """`connection` closed if anything fails meanwhile (an answer's body half read, a request
    half sent), so it is never reused in an unknown state."""
    try:
        yield
    except BaseException:
        connection.close()
        raise


def _sent(
    connection: http.client.HTTPConnection,
    method: str,
    target: str,
    path: str,
    headers: dict,
    body: dict | None = None,
) -> http.client.HTTPResponse:
    """The answer to a request on `connection` once it is a success (else the error it stands
    for); the connection closed on any failure."""
    sent = None if body is None else json.dumps(body).encode()
    headers = headers if body is None else {**headers, "Content-Type": "application/json"}
    with _closed_on_failure(connection):
        response = connections.send(connection, method, target, headers, sent)
        _raise_for_status(response, path)
    return response


def _raise_for_status(response, path: str) -> None:
    """Nothing for a success; for any other answer, the error it stands for."""
    if response.status in (200, 204, 206):
        return
    reason = " ".join(response.read(1000).decode("utf-8", "replace").split())[:200]
    message = f"{response.status} {response.reason}: {reason}"
    if response.status == 404:
        raise FileNotFoundError(2, "no such object", path)
    if response.status in (401, 403):
        raise PermissionError(13, f"permission denied ({message})", path)
    if response.status in _TRANSIENT_STATUS:
        raise TransientStoreError(message)
    raise OSError(f"{path}: {message}")


def _announced_crc32c(x_goog_hash: str) -> str | None:
    """The CRC-32C in an X-Goog-Hash header (`crc32c=...,md5=...`), or None when it has none."""
    for part in x_goog_hash.split(","):
        kind, _, value = part.strip().partition("=")
        if kind == "crc32c":
            return value
    return None
