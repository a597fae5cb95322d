"""An image's one request (transforms/storage/jsonapi.py): against the emulator, a server that
answers what Cloud Storage answers when it refuses, the fault proxy, and real TLS through an
https proxy with credentials refreshed on the way."""

import http.server
import json
import threading

import pytest
from fault_proxy import DAMAGE, FaultProxy
from loopback import LoopbackServer
from tls_proxy import TOKEN, TlsProxy

from tfrecord_pipeline.transforms.storage import connection, jsonapi
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
        (429, jsonapi.TransientStoreError, True),
        (503, jsonapi.TransientStoreError, True),
        (408, jsonapi.TransientStoreError, True),
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


def test_through_an_https_proxy_over_tls_with_google_credentials_refreshed(
    objects, gcs, tmp_path, monkeypatch
):
    """No emulator address: the request goes to storage.googleapis.com, tunnelled through the
    https proxy the environment names, over TLS checked against the CA bundle it names, with a
    token Google's default credentials got from their token endpoint (answered by the proxy)."""
    path = objects("over-tls.jpg")
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
            results = []
            threads = [
                threading.Thread(target=lambda: results.append(jsonapi.media(path, None)))
                for _ in range(4)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            connection._store_for.cache_clear()
    assert results == [(DATA, crc32c_of(DATA))] * 4
    assert proxy.authorizations == [f"Bearer {TOKEN}"] * 4
