"""An image's one request (transforms/storage/jsonapi.py): against the emulator, a server that
answers what Cloud Storage answers when it refuses, the fault proxy, and real TLS through an
https proxy with credentials refreshed on the way."""

import base64
import gzip
import http.server
import io
import json
import threading

import pytest
from fault_proxy import DAMAGE, FaultProxy
from loopback import LoopbackServer
from tls_proxy import TOKEN, TlsProxy

from tfrecord_pipeline.transforms.storage import answers, connection, jsonapi, retry
from tfrecord_pipeline.transforms.storage import gcs as store
from tfrecord_pipeline.transforms.storage.range_reader import RangeReader
from tfrecord_pipeline.transforms.storage.retry import CorruptTransferError, is_transient
from tfrecord_pipeline.transforms.tfrecord.records import crc32c_of

DATA = bytes(range(256)) * 160  # 40 KB


@pytest.mark.parametrize(
    ("header", "crc32c"),
    [
        ("crc32c=/CZwdA==,md5=M3Zs1IDeBqay4FPrj2dYPg==", "/CZwdA=="),
        ("md5=M3Zs1IDeBqay4FPrj2dYPg==, crc32c=AAAAAA==", "AAAAAA=="),
        ("md5=M3Zs1IDeBqay4FPrj2dYPg==", None),
        ("", None),
    ],
)
def test_the_announced_crc32c_is_read_from_x_goog_hash(header, crc32c):
    assert jsonapi._announced_crc32c(header) == crc32c


@pytest.fixture
def objects(gcs, request):
    """Uploads DATA as `name` under this test's own prefix; returns its gs:// path maker."""
    prefix = request.node.name[:40]

    def put(name: str, data: bytes = DATA) -> str:
        gcs.bucket.blob(f"{prefix}/{name}").upload_from_string(data)
        return f"gs://tfrp-test/{prefix}/{name}"

    put.prefix = prefix
    return put


def test_an_object_is_its_bytes_and_their_crc32c_and_none_over_the_limit(objects):
    path = objects("dir with space/a+b.jpg")
    assert jsonapi.media(path, None) == (DATA, crc32c_of(DATA))
    assert jsonapi.media(path, len(DATA)) == (DATA, crc32c_of(DATA))
    assert jsonapi.media(path, len(DATA) - 1) is None
    # The connection closed with a body unread is not reused: the next read is whole.
    assert jsonapi.media(path, None).data == DATA


def test_a_missing_object_is_file_not_found(objects):
    objects("there.jpg")
    with pytest.raises(FileNotFoundError):
        jsonapi.media(objects("there.jpg").replace("there", "not-there"), None)


def test_a_body_not_matching_its_announced_crc32c_is_a_corrupt_transfer(objects, gcs, monkeypatch):
    path = objects("damaged.jpg")
    damage = {f"{objects.prefix}/damaged.jpg": DAMAGE}
    with FaultProxy(gcs.port, objects.prefix, always=damage) as proxy:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{proxy.port}")
        with pytest.raises(CorruptTransferError) as raised:
            jsonapi.media(path, None)
    assert is_transient(raised.value)


class _Refusing(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the status the path asks for (`/.../403.jpg` is a 403)."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 - http.server's name
        status = int(self.path.split("?")[0].rsplit("%2F", 1)[1].split(".")[0])
        body = json.dumps({"error": {"code": status, "message": "refused"}}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(
    ("status", "raised", "transient"),
    [
        (403, PermissionError, False),
        (401, PermissionError, False),
        (400, OSError, False),
        (412, answers.PreconditionFailedError, False),
        (429, answers.TransientStoreError, True),
        (503, answers.TransientStoreError, True),
        (408, answers.TransientStoreError, True),
    ],
)
def test_a_refusal_is_the_objects_failure_and_a_busy_service_is_transient(
    status, raised, transient, monkeypatch
):
    with LoopbackServer(_Refusing) as server:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{server.port}")
        with pytest.raises(raised) as error:
            jsonapi.media(f"gs://b/x/{status}.jpg", None)
    assert is_transient(error.value) is transient
    assert str(status) in str(error.value)


@pytest.fixture
def over_tls(gcs, tmp_path, monkeypatch):
    """No emulator address: requests go to storage.googleapis.com, tunnelled through the https
    proxy the environment names (tests/tls_proxy.py), over TLS checked against the CA bundle it
    names, with a token Google's default credentials got from their token endpoint (answered by
    the proxy). Yields the proxy."""
    key = tmp_path / "adc.json"
    key.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "client_id": "i",
                "client_secret": "s",
                "refresh_token": "r",
            }
        )
    )
    with TlsProxy(tmp_path, gcs.port) as proxy:
        monkeypatch.delenv("STORAGE_EMULATOR_HOST")
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(proxy.ca_bundle))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
        connection._store_for.cache_clear()
        try:
            yield proxy
        finally:
            connection._store_for.cache_clear()


def test_through_an_https_proxy_over_tls_with_google_credentials_refreshed(objects, over_tls):
    path = objects("over-tls.jpg")
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(jsonapi.media(path, None))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [(DATA, crc32c_of(DATA))] * 4
    assert over_tls.authorizations == [f"Bearer {TOKEN}"] * 4


def test_a_token_refused_on_the_way_is_refreshed_once_and_the_run_goes_on(objects, over_tls):
    path = objects("expired.jpg")
    over_tls.refuse = {2}
    assert [jsonapi.media(path, None) for _ in range(4)] == [(DATA, crc32c_of(DATA))] * 4
    assert len(over_tls.authorizations) == 5  # the refused request, asked once more
    assert over_tls.token_requests == 2
    assert over_tls.tunnels["storage.googleapis.com"] == 1  # one TLS connection kept alive


def test_a_token_endpoint_failing_is_transient_then_the_store_unavailable(
    objects, over_tls, monkeypatch
):
    path = objects("no-token.jpg")
    over_tls.token_status = 500  # each refresh asks it three times itself (google-auth's own)
    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0.001)
    monkeypatch.setattr(retry, "ATTEMPTS", 2)
    with pytest.raises(retry.StoreUnavailableError):
        store.read(path, None)
    over_tls.token_status = 200
    assert store.read(path, None).data == DATA
    assert over_tls.authorizations == [f"Bearer {TOKEN}"]


NAMES = ["a b.jpg", "a#b.jpg", "a?b=c&d.jpg", "100%25 a%2Fb.jpg", "ünï 写真.jpg", "/lead.jpg"]
NAMES += ["dir//double.jpg", "+plus.jpg", "semi;colon:@.jpg"]


@pytest.mark.parametrize("name", NAMES)
def test_an_object_named_with_any_character_is_read_stated_ranged_and_listed(objects, name):
    path = objects(name, DATA[: 1000 + len(name)])
    data = DATA[: 1000 + len(name)]
    assert jsonapi.media(path, None) == (data, crc32c_of(data))
    assert store.stat(path) == store.Stat(len(data), store.identity(len(data), crc32c_of(data)))
    assert io.BufferedReader(RangeReader(path), 300).read() == data
    bucket, key = store.split(path)
    assert jsonapi.list_page(bucket, key, "", None, None).names == [key]
    assert store.holds_objects(f"gs://{bucket}/{objects.prefix}")
    if "/" not in name:  # (a folder "x//" is "x/"'s: an empty folder name is not walked)
        assert (name, False) in list(store.list_folder(f"gs://{bucket}/{objects.prefix}"))


def test_a_bucket_named_with_dots(gcs):
    bucket = gcs.bucket.client.create_bucket("tfrp.test.dots")
    bucket.blob("x/a b.jpg").upload_from_string(DATA)
    assert jsonapi.media("gs://tfrp.test.dots/x/a b.jpg", None).data == DATA
    assert list(store.list_folder("gs://tfrp.test.dots/x")) == [("a b.jpg", False)]


def test_an_object_stored_gzipped_is_its_stored_bytes_matching_their_crc32c(gcs, objects):
    """Cloud Storage unzips a gzip-encoded object for a client that does not accept gzip, and
    a range of it then is not the stored one: media, stat and ranges all ask for it as stored."""
    stored = gzip.compress(DATA)
    blob = gcs.bucket.blob(f"{objects.prefix}/zipped.csv.gz")
    blob.content_encoding = "gzip"
    blob.upload_from_string(stored)
    path = f"gs://tfrp-test/{objects.prefix}/zipped.csv.gz"
    assert jsonapi.media(path, None) == (stored, crc32c_of(stored))
    assert jsonapi.media(path, len(stored)) == (stored, crc32c_of(stored))
    assert store.stat(path).size == len(stored)
    assert io.BufferedReader(RangeReader(path), 100).read() == stored


def test_a_proxy_named_with_credentials_is_asked_with_them(objects, over_tls, monkeypatch):
    """HTTPS_PROXY=http://user:password@host:port, as requests and curl take it."""
    path = objects("behind-a-proxy.jpg")
    over_tls.proxy_authorization = "Basic " + base64.b64encode(b"u s:p@ss").decode()
    monkeypatch.setenv("HTTPS_PROXY", f"http://u%20s:p%40ss@127.0.0.1:{over_tls.port}")
    assert jsonapi.media(path, None) == (DATA, crc32c_of(DATA))
