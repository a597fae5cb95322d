"""A keep-alive connection a thread to Cloud Storage's JSON API (or the emulator
STORAGE_EMULATOR_HOST names), and the request that authorises itself on it; the requests are
transforms/storage/jsonapi.py's.

A thread keeps its own connection (it only ever waits on its own request), re-made after a fork
and after any failure (the caller closes it), so a connection is never reused in an unknown
state. Credentials are Google's default ones, as the Python client finds them, refreshed when
they expire; an https proxy in the environment (HTTPS_PROXY, NO_PROXY) and a CA bundle
(REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE) are honoured, as requests honours them.
"""

import base64
import functools
import http.client
import os
import select
import ssl
import threading
import urllib.parse
import urllib.request
from typing import NamedTuple

from tfrecord_pipeline.transforms.storage.http_answers import Answer
from tfrecord_pipeline.transforms.storage.retry import TIMEOUT_S

_ENDPOINT = "https://storage.googleapis.com"
_SCOPES = ("https://www.googleapis.com/auth/devstorage.full_control",)


class _Store(NamedTuple):
    """Where requests go, and what authorises them (None: an emulator, which wants nothing)."""

    scheme: str
    host: str
    credentials: object | None


def send(
    connection: http.client.HTTPConnection,
    method: str,
    target: str,
    headers: dict,
    body: bytes | None = None,
) -> http.client.HTTPResponse:
    """The answer to one request (`method` of `target`, with `body` if any) on `connection`,
    its body unread. A 401 (a token that expired on the way) is asked once more with a
    refreshed token, as Google's authorised sessions do: not a retry of a failure."""
    for refresh in (False, True):
        sent = {"Accept-Encoding": "gzip", **headers, **_authorization(refresh)}  # gzip: as stored
        connection.request(method, target, body, headers=sent)
        response = connection.getresponse()
        if response.status != 401 or refresh or _store().credentials is None:
            return response
        response.read()
    raise AssertionError("unreachable")


_local = threading.local()


def connection() -> http.client.HTTPConnection:
    """This thread's open connection to the store (a new one after a fork, or after the last
    one was closed on a failure)."""
    store = _store()
    key = (os.getpid(), store.scheme, store.host)
    connection = getattr(_local, "connection", None)
    if connection is None or _local.key != key or _dropped(connection):
        if connection is not None:
            connection.close()
        connection = _new_connection(store)
        _local.connection, _local.key = connection, key
    return connection


def _dropped(connection: http.client.HTTPConnection) -> bool:
    """Whether a kept connection cannot carry another request: closed here, or readable while
    idle, which is the server having closed it (as it does to connections idle too long; a
    request sent on it would fail, and be retried, for nothing). poll, not select: a busy
    worker's sockets are numbered past select's limit of 1,024."""
    if connection.sock is None:
        return True
    idle = select.poll()
    idle.register(connection.sock, select.POLLIN)
    return bool(idle.poll(0))


def own_connection(kept: http.client.HTTPConnection | None) -> http.client.HTTPConnection:
    """A connection to the store for the caller alone, for a response held open across calls
    (a streamed read), which this thread's connection must never be left holding: `kept`, the
    caller's last one, while it can carry another request, else a new one."""
    if kept is not None and not _dropped(kept):
        return kept
    if kept is not None:
        kept.close()
    return _new_connection(_store())


def _new_connection(store: _Store) -> http.client.HTTPConnection:
    connection = _connection_to(store)
    connection.response_class = Answer  # its headers read without the email package
    return connection


def _connection_to(store: _Store) -> http.client.HTTPConnection:
    if store.scheme == "http":
        return http.client.HTTPConnection(store.host, timeout=TIMEOUT_S)
    proxy = _https_proxy(store.host)
    if proxy is None:
        return http.client.HTTPSConnection(store.host, timeout=TIMEOUT_S, context=_tls())
    port = proxy.port or (443 if proxy.scheme == "https" else 80)
    connection = http.client.HTTPSConnection(
        proxy.hostname, port, timeout=TIMEOUT_S, context=_tls()
    )
    connection.set_tunnel(store.host, headers=_proxy_authorization(proxy))
    return connection


def _https_proxy(host: str) -> urllib.parse.SplitResult | None:
    """The https proxy the environment names for `host`, if any."""
    proxy = urllib.request.getproxies().get("https")
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    return urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")


def _proxy_authorization(proxy: urllib.parse.SplitResult) -> dict[str, str]:
    """The Proxy-Authorization of a proxy named with credentials (`http://user:pass@host`, as
    requests and curl take them, percent-encoded), else nothing."""
    if proxy.username is None:
        return {}
    user = f"{urllib.parse.unquote(proxy.username)}:{urllib.parse.unquote(proxy.password or '')}"
    return {"Proxy-Authorization": "Basic " + base64.b64encode(user.encode()).decode()}


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
