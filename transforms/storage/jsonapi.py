"""Cloud Storage's JSON API over one keep-alive connection a thread, for the request a run sends
once an image: the GET of its media.

Google's Python client spends four to five times the CPU of the work itself on that request
(benchmarks/gcs_read_cost.py): requests' session, google-resumable-media's download machinery,
reading proxy settings from the environment for every request. On Dataflow CPU is the bill.
The standard library's http.client does the same request for less than Arrow's C++ client
does, and leaves every decision here, where the project makes it: one request, no retry
of its own (transforms/storage/retry.py is the one retry layer), a timeout on each wait, the
body checked against the CRC-32C its response announces.

Each thread keeps its own connection to the store (a thread only ever waits on its own
request), re-made after a fork and after any failure, so a connection is never reused in an
unknown state. Credentials are Google's default ones, as the Python client finds them,
refreshed when they expire; STORAGE_EMULATOR_HOST points requests at an emulator, as it
points Google's clients. An https proxy in the environment (HTTPS_PROXY, NO_PROXY) is honoured.
"""

import functools
import http.client
import os
import ssl
import threading
import urllib.parse
import urllib.request
from typing import NamedTuple

from tfrecord_pipeline.transforms.storage.retry import TIMEOUT_S, CorruptTransferError
from tfrecord_pipeline.transforms.tfrecord.records import crc32c_of

_ENDPOINT = "https://storage.googleapis.com"
_SCOPES = ("https://www.googleapis.com/auth/devstorage.full_control",)
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})  # as retry.py retries them


class TransientStoreError(ConnectionError):
    """An answer the service gives when it, not the object, failed (408, 429, 5xx): retried."""


class Media(NamedTuple):
    data: bytes
    crc32c: str  # base64, as Cloud Storage gives it


class _Store(NamedTuple):
    """Where requests go, and what authorises them (None: an emulator, which wants nothing)."""

    scheme: str
    host: str
    credentials: object | None


def media(path: str, max_bytes: int | None) -> Media | None:
    """The bytes of the object `gs://bucket/name` from one GET of its media, checked against
    the CRC-32C its response announces; None when it holds more than `max_bytes` (then its
    body is never read). A missing object raises FileNotFoundError; one the caller may not
    read, PermissionError; a failure of the service or the network, an exception
    retry.is_transient retries. Not retried here."""
    bucket, _, name = path.removeprefix("gs://").partition("/")
    target = f"/download/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"
    connection = _connection()
    try:
        response = _send(connection, target)
        _raise_for_status(response, path)
        size = response.getheader("Content-Length")
        if max_bytes is not None and size is not None and int(size) > max_bytes:
            connection.close()  # the body is left unread: the connection cannot be reused
            return None
        data = response.read() if max_bytes is None else response.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:
            connection.close()
            return None
    except BaseException:
        connection.close()
        raise
    crc32c = crc32c_of(data)
    announced = _announced_crc32c(response.getheader("X-Goog-Hash", ""))
    if announced is not None and announced != crc32c:
        raise CorruptTransferError(f"{path}: {len(data):,} bytes not matching X-Goog-Hash")
    return Media(data, crc32c)


def _send(connection: http.client.HTTPConnection, target: str) -> http.client.HTTPResponse:
    """The answer to one GET; a 401 (a token that expired on the way) once more with a token
    refreshed, as Google's authorised sessions do, which is not a retry of a failure."""
    for refresh in (False, True):
        headers = {"Accept-Encoding": "gzip"}  # the bytes as stored, never decompressed
        headers.update(_authorization(refresh))
        connection.request("GET", target, headers=headers)
        response = connection.getresponse()
        if response.status != 401 or refresh or _store().credentials is None:
            return response
        response.read()
    raise AssertionError("unreachable")


def _raise_for_status(response: http.client.HTTPResponse, path: str) -> None:
    if response.status == 200:
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


_local = threading.local()


def _connection() -> http.client.HTTPConnection:
    """This thread's open connection to the store (a new one after a fork, or after the last
    one was closed on a failure)."""
    store = _store()
    key = (os.getpid(), store.scheme, store.host)
    connection = getattr(_local, "connection", None)
    if connection is None or _local.key != key or connection.sock is None:
        if connection is not None:
            connection.close()
        connection = _new_connection(store)
        _local.connection, _local.key = connection, key
    return connection


def _new_connection(store: _Store) -> http.client.HTTPConnection:
    if store.scheme == "http":
        return http.client.HTTPConnection(store.host, timeout=TIMEOUT_S)
    proxy = _https_proxy(store.host)
    if proxy is None:
        return http.client.HTTPSConnection(store.host, timeout=TIMEOUT_S, context=_tls())
    connection = http.client.HTTPSConnection(proxy, timeout=TIMEOUT_S, context=_tls())
    connection.set_tunnel(store.host)
    return connection


def _https_proxy(host: str) -> str | None:
    """The `host:port` of the https proxy the environment names for `host`, if any."""
    proxy = urllib.request.getproxies().get("https")
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    return urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}").netloc


def _tls() -> ssl.SSLContext:
    """Certificates as Google's Python clients trust them: the bundle REQUESTS_CA_BUNDLE or
    CURL_CA_BUNDLE names (a company's TLS-inspecting proxy), else certifi's."""
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    return _tls_for(bundle)


@functools.cache
def _tls_for(bundle: str | None) -> ssl.SSLContext:
    if bundle is None:
        import certifi

        bundle = certifi.where()
    return ssl.create_default_context(cafile=bundle)


def _store() -> _Store:
    return _store_for(os.environ.get("STORAGE_EMULATOR_HOST"))


@functools.cache
def _store_for(emulator: str | None) -> _Store:
    """The store requests go to: the emulator STORAGE_EMULATOR_HOST names, or Cloud Storage with
    Google's default credentials (google-auth's error when there are none, which the command
    line tells in one line)."""
    if emulator:
        scheme, _, host = emulator.rpartition("://")
        return _Store(scheme or "http", host.rstrip("/"), None)
    import google.auth

    credentials, _ = google.auth.default(scopes=_SCOPES)
    return _Store("https", urllib.parse.urlsplit(_ENDPOINT).netloc, credentials)


_refreshing = threading.Lock()


def _authorization(refresh: bool) -> dict[str, str]:
    """The Authorization header of a request (none for an emulator), the token refreshed first
    when it has expired or `refresh` asks, by one thread while the others wait."""
    credentials = _store().credentials
    if credentials is None:
        return {}
    if refresh or not credentials.valid:
        refused = credentials.token
        with _refreshing:  # unless another thread refreshed it meanwhile
            if credentials.token == refused or not credentials.valid:
                import google.auth.transport.requests

                credentials.refresh(google.auth.transport.requests.Request())
    return {"Authorization": f"Bearer {credentials.token}"}
