"""The GETs a run sends Cloud Storage's JSON API itself, each one request on this thread's
keep-alive connection (transforms/storage/connection.py): an image's media (once an image),
an object's metadata (a refresh's and a plan's stat of an image), a range of a manifest, a page
of a listing; and its deletions.

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


def media_range(path: str, start: int, end: int) -> bytes:
    """Bytes `start` to `end` (exclusive) of an object's media, from one ranged GET. A server
    that ignores the Range (a proxy in the way) and answers the whole object raises OSError,
    its body unread: those are not the bytes asked for."""
    headers = {"Range": f"bytes={start}-{end - 1}"}
    with _answer(_object(path, "/download") + "?alt=media", path, headers) as (_, response):
        if response.status != 206 and (start, response.length) != (0, end - start):
            raise OSError(f"{path}: the whole object answered a Range of bytes {start:,}-{end:,}")
        return response.read()


def metadata(path: str) -> dict:
    """An object's size, CRC-32C and generation (its metadata's own names and strings)."""
    fields = "?fields=size%2Ccrc32c%2Cgeneration"
    with _answer(_object(path) + fields, path) as (_, response):
        return json.loads(response.read())


class Page(NamedTuple):
    names: list[str]
    prefixes: list[str]
    next_token: str | None


def list_page(
    bucket: str, prefix: str, delimiter: str, token: str | None, max_results: int | None
) -> Page:
    """One page of the names in `bucket` starting with `prefix` (and, with a `delimiter`, the
    prefixes ending at it), and the token of the next page (None after the last)."""
    query = {"prefix": prefix, "fields": "items(name),prefixes,nextPageToken"}
    query.update({"delimiter": delimiter} if delimiter else {})
    query.update({"pageToken": token} if token else {})
    query.update({"maxResults": str(max_results)} if max_results else {})
    target = f"/storage/v1/b/{_quoted(bucket)}/o?{urllib.parse.urlencode(query)}"
    with _answer(target, f"gs://{bucket}/{prefix}") as (_, response):
        page = json.loads(response.read())
    names = [item["name"] for item in page.get("items", ())]
    return Page(names, page.get("prefixes", []), page.get("nextPageToken"))


def delete(path: str) -> None:
    """Deletes an object with one DELETE; FileNotFoundError when there is none."""
    with _answer(_object(path), path, method="DELETE") as (_, response):
        response.read()


def _object(path: str, root: str = "") -> str:
    bucket, _, name = path.removeprefix("gs://").partition("/")
    return f"{root}/storage/v1/b/{_quoted(bucket)}/o/{_quoted(name)}"


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


@contextlib.contextmanager
def _answer(target: str, path: str, headers: dict | None = None, method: str = "GET"):
    """(this thread's connection, the answer to a GET of `target`) once it is a success, its
    body left to read; the connection closed if anything fails meanwhile, so it is never
    reused in an unknown state. An answer that is not a success raises as `_raise_for_status`
    tells."""
    connection = connections.connection()
    try:
        response = connections.get(connection, target, headers or {}, method)
        _raise_for_status(response, path)
        yield connection, response
    except BaseException:
        connection.close()
        raise


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
