"""The requests a run sends Cloud Storage's JSON API itself, each one request on this thread's
keep-alive connection (transforms/storage/connection.py): an image's media (once an image),
an object's metadata (a refresh's and a plan's stat of an image), a page of a listing (with
each object's size and CRC-32C for a refresh's identities), a shard's compose, a server-side
copy, a deletion (of one generation, when asked), a small object's media pinned to the
generation its metadata gave; and ranges of a manifest, streamed on a connection of their
reader's own. Uploads are uploads.py's; a request and what its answer stands for (the error
vocabulary), answers.py's.

Google's Python client spends four to five times the CPU of the work itself on a request
(benchmarks/gcs_read_cost.py, benchmarks/gcs_request_cost.py): requests' session,
google-resumable-media's download machinery, reading proxy settings from the environment for
every request. On Dataflow CPU is the bill. The standard library's http.client does the same
request for less than Arrow's C++ client does, and leaves every decision here, where the
project makes it: one request, no retry of its own (transforms/storage/retry.py is the one
retry layer), a timeout on each wait, a body checked against the CRC-32C its response
announces.
"""

import datetime
import email.utils
import http.client
import json
import urllib.parse
from typing import NamedTuple

from tfrecord_pipeline.transforms.storage import connection as connections
from tfrecord_pipeline.transforms.storage.answers import (
    answer,
    closed_on_failure,
    json_answer,
    object_target,
    quoted,
    sent,
    split,
    with_query,
)
from tfrecord_pipeline.transforms.storage.retry import CorruptTransferError
from tfrecord_pipeline.transforms.tfrecord.records import crc32c_of


class Media(NamedTuple):
    data: bytes
    crc32c: str  # base64, as Cloud Storage gives it


def media(path: str, max_bytes: int | None, generation: int | None = None) -> Media | None:
    """The bytes of the object `gs://bucket/name` (of its `generation`, when given: a
    FileNotFoundError once that generation is gone) from one GET of its media, checked against
    the CRC-32C its response announces; None when it holds more than `max_bytes` (then its
    body is never read). A missing object raises FileNotFoundError; one the caller may not
    read, PermissionError; a failure of the service or the network, an exception
    retry.is_transient retries. Not retried here, as nothing in this module is. (The emulator,
    gcp-storage-emulator, ignores `generation`: it answers the object's current bytes.)"""
    target = with_query(object_target(path, "/download"), alt="media", generation=generation)
    with answer(target, path) as (connection, response):
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
    target = object_target(path, "/download") + "?alt=media"
    response = sent(connection, "GET", target, path, headers)
    if response.status != 206 and (start, response.length) != (0, end - start):
        connection.close()
        raise OSError(f"{path}: the whole object answered a Range of bytes {start:,}-{end:,}")
    return response


def media_range(path: str, start: int, end: int) -> bytes:
    """Bytes `start` to `end` (exclusive) of an object, from one ranged GET on this thread's
    connection (a record, a footer: small enough to read at once)."""
    connection = connections.connection()
    with closed_on_failure(connection):
        return media_from(connection, path, start, end).read()


def metadata(path: str) -> dict:
    """An object's size, CRC-32C and generation (its metadata's own names and strings)."""
    return json_answer(with_query(object_target(path), fields="size,crc32c,generation"), path)


class Stamped(NamedTuple):
    generation: int
    age_s: float  # since the object was written, by the store's clock: never more than it is


def stamped(path: str) -> Stamped:
    """An object's generation, and how long ago it was written by the store's own clock: its
    `updated` time, against the Date its answer carries (whole seconds, rounded down), so no
    machine's clock is trusted and the age is never overstated. FileNotFoundError if none."""
    target = with_query(object_target(path), fields="generation,updated")
    with answer(target, path) as (_, response):
        found, date = json.loads(response.read()), response.getheader("Date")
    written = datetime.datetime.fromisoformat(found["updated"].replace("Z", "+00:00"))
    now = email.utils.parsedate_to_datetime(date)
    return Stamped(int(found["generation"]), (now - written).total_seconds())


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
    target = f"/storage/v1/b/{quoted(bucket)}/o?{urllib.parse.urlencode(query)}"
    with answer(target, f"gs://{bucket}/{query['prefix']}") as (_, response):
        return json.loads(response.read())


def compose(sources: list[str], destination: str) -> str:
    """Makes `destination` of objects `sources` (in its bucket), one after another, with one
    compose request; the CRC-32C of the whole, as the answer gives it."""
    parts = [{"name": split(source)[1]} for source in sources]
    body = {"sourceObjects": parts, "destination": {"name": split(destination)[1]}}
    target = object_target(destination) + "/compose?fields=crc32c"
    with answer(target, destination, method="POST", body=body) as (_, response):
        return json.loads(response.read())["crc32c"]


def copy(source: str, destination: str) -> None:
    """Copies an object within the store (which checks its CRC-32C) with one copy request."""
    to = object_target(destination).removeprefix("/storage/v1")
    target = f"{object_target(source)}/copyTo{to}"
    with answer(target + "?fields=name", source, method="POST") as (_, response):
        response.read()


def delete(path: str, if_generation_match: int | None = None) -> None:
    """Deletes an object with one DELETE; FileNotFoundError when there is none. With
    `if_generation_match`, only that generation of it (else PreconditionFailedError; the
    emulator ignores the condition and deletes whatever is there)."""
    target = with_query(object_target(path), ifGenerationMatch=if_generation_match)
    with answer(target, path, method="DELETE") as (_, response):
        response.read()


def _announced_crc32c(x_goog_hash: str) -> str | None:
    """The CRC-32C in an X-Goog-Hash header (`crc32c=...,md5=...`), or None when it has none."""
    for part in x_goog_hash.split(","):
        kind, _, value = part.strip().partition("=")
        if kind == "crc32c":
            return value
    return None
