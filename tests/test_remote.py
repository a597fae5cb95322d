"""transforms/storage/remote.py: objects on Cloud Storage (against the GCS emulator) and on any
other store through Beam's FileSystems, which is never retried a second time around it."""

import socketserver

import pytest
from loopback import LoopbackServer

from tfrecord_pipeline.transforms.storage import disk, remote, retry


@pytest.fixture(scope="module")
def objects(gcs, tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("remote")
    (folder / "a.jpg").write_bytes(b"\xff\xd8" + bytes(range(256)) * 4)
    (folder / "sub").mkdir()
    (folder / "sub" / "b.jpg").write_bytes(b"b")
    return gcs(folder, "remote")


def test_a_read_gives_the_bytes_and_the_identity_a_stat_gives(objects):
    data, identity = remote.read(f"{objects}/a.jpg", None)
    assert len(data) == remote.size(f"{objects}/a.jpg") == 1026
    assert identity == remote.identity(f"{objects}/a.jpg")
    assert remote.read(f"{objects}/a.jpg", 1026)[0] == data  # exactly the limit: not over


def test_an_object_over_the_limit_is_refused_with_its_size(objects):
    with pytest.raises(disk.FileTooLargeError, match="1,026 bytes, over the limit of 1,000"):
        remote.read(f"{objects}/a.jpg", 1000)


def test_a_stream_reads_ranges_of_an_object(objects):
    with remote.open_stream(f"{objects}/a.jpg", 16) as stream:
        assert stream.seek(2) == 2 and stream.read(3) == bytes([0, 1, 2])
        assert stream.seek(-2, 2) == 1024 and stream.read() == bytes([254, 255])


def test_a_match_lists_objects_at_any_depth_sorted(objects):
    assert remote.glob(f"{objects}/**") == [f"{objects}/a.jpg", f"{objects}/sub/b.jpg"]


def test_a_match_keeps_beams_syntax(objects):
    assert remote.glob(f"{objects}/*.jpg") == [f"{objects}/a.jpg"]  # `*` stays in its folder
    assert remote.glob(f"{objects}/s?b/[ab].jpg") == [f"{objects}/sub/b.jpg"]
    assert remote.glob(f"{objects}/a.jpg") == [f"{objects}/a.jpg"]
    assert remote.glob(f"{objects}/none/**") == remote.glob(f"{objects}/none.jpg") == []


def test_another_stores_read_is_left_to_its_own_client(monkeypatch):
    """Another store's FileSystems client retries its requests itself: a failure that reaches
    us is raised at once, not sent again by the retry layer as well."""
    opened = []

    class Store:
        @staticmethod
        def match(paths):
            return [type("Match", (), {"metadata_list": [_Metadata()]})]

        @staticmethod
        def open(path, compression_type):
            opened.append(path)
            raise ConnectionResetError("reset")

    monkeypatch.setattr(remote, "filesystems", lambda path: Store)
    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0)
    with pytest.raises(ConnectionResetError):
        remote.read("s3://bucket/a.jpg", None)
    assert opened == ["s3://bucket/a.jpg"]


class _Metadata:
    size_in_bytes = 3
    last_updated_in_seconds = 1.5


def test_objects_are_written_whole_copied_moved_and_deleted_on_the_store(objects):
    one, two, three = (f"{objects}/written/{name}" for name in ("one", "two", "three"))
    remote.write(one, b"abc")
    remote.copy(one, two)
    remote.rename(two, three)
    assert remote.read(one, None)[0] == remote.read(three, None)[0] == b"abc"
    assert remote.exists(three) and not remote.exists(two)
    remote.delete([one, two, three])  # `two` is gone already: not an error
    assert remote.glob(f"{objects}/written/**") == []


def test_a_copy_failing_on_the_way_is_sent_again_by_the_one_retry_layer(objects, faulty_gcs):
    """A 503, a dropped connection or a lost answer (the copy made all the same) fail the
    first two attempts, each one request; the third makes the same object."""
    source, copied = f"{objects}/a.jpg", f"{objects}/copied/a.jpg"
    proxy = faulty_gcs("remote/a.jpg", rate=1.0, copies_too=True)  # a copy names its source
    remote.copy(source, copied)
    target = "remote/a.jpg/copyTo/b/tfrp-test/o/remote/copied/a.jpg"
    assert proxy.requests["POST", target] == 3 and sum(proxy.faults.values()) == 2
    assert remote.read(copied, None)[0] == remote.read(source, None)[0]
    with pytest.raises(FileNotFoundError):
        remote.copy(f"{objects}/no-such.jpg", copied)


def test_a_streamed_upload_makes_its_object_only_when_closed(objects):
    path = f"{objects}/streamed/shard"
    with remote.create(path) as handle:
        for _ in range(64):
            handle.write(bytes(range(256)) * 64)
        assert not remote.exists(path)
    assert remote.read(path, None)[0] == bytes(range(256)) * 64 * 64


class _Failing(socketserver.StreamRequestHandler):
    """Fails every request as the server's `fault` says: a 503, or the connection dropped."""

    def handle(self):
        while line := self.rfile.readline().strip():
            length = 0
            while header := self.rfile.readline().strip():
                name, _, value = header.decode().partition(":")
                length = int(value) if name.lower() == "content-length" else length
            self.rfile.read(length)  # an upload's body
            self.server.requests.append(line.decode())
            if self.server.fault == "drop":
                return
            body = b'{"error": {"code": 503, "message": "injected"}}'
            head = f"HTTP/1.1 503 Service Unavailable\r\nContent-Length: {len(body)}\r\n\r\n"
            self.wfile.write(head.encode() + body)


@pytest.mark.parametrize("fault", ["503", "drop"])
def test_a_write_the_store_keeps_failing_is_sent_once_an_attempt_then_a_fault(monkeypatch, fault):
    """`retried` is the one layer, each attempt one request: two attempts show it."""
    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0.001)
    monkeypatch.setattr(retry, "ATTEMPTS", 2)
    with LoopbackServer(_Failing) as server:
        server.fault, server.requests = fault, []
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{server.port}")
        with pytest.raises(retry.StoreUnavailableError):
            remote.write("gs://bucket/dataset/LATEST.tmp", b"{}")
    assert len(server.requests) == retry.ATTEMPTS
    assert all(request.startswith("POST /upload/") for request in server.requests)


def test_checks_and_matches_through_faults_answer_as_clean_ones_sent_once_a_fault(
    objects, faulty_gcs
):
    """Each fault the proxy injects costs one more request, from `retried`: no second layer."""
    asks = (f"{objects}/a.jpg", f"{objects}/sub/b.jpg", f"{objects}/none.jpg")
    clean = [remote.exists(path) for path in asks], remote.glob(f"{objects}/**")
    proxy = faulty_gcs("remote/", rate=0.6, seed=5, listings_too=True)
    assert ([remote.exists(path) for path in asks], remote.glob(f"{objects}/**")) == clean
    assert sum(proxy.faults.values()) > 0
    sent = {name: proxy.requests["GET", name] for name in ("remote/a.jpg", "remote/none.jpg")}
    sent["remote/"] = proxy.listings["remote/"]  # the match's listing
    assert sent == {name: 1 + proxy.failed[name] for name in sent}
