"""The thread's keep-alive connection (transforms/storage/connection.py) and the GETs on it
(transforms/storage/jsonapi.py) against servers that behave as real networks and servers do:
idle connections closed by the server, `Connection: close` and HTTP/1.0 answers, bodies cut,
stalled, longer than announced or chunked, a Range ignored. Each request here is sent once,
with no retry around it: a connection problem the client should have seen coming fails it."""

import concurrent.futures
import gc
import http.client
import io
import multiprocessing
import os
import threading

import pytest
from conftest import make_images, write_manifest
from scripted_server import response

from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.storage import connection, jsonapi, retry
from tfrecord_pipeline.transforms.storage.range_reader import RangeReader
from tfrecord_pipeline.transforms.tfrecord.records import crc32c_of

DATA = bytes(range(256)) * 160  # 40 KB


def _hash(data: bytes) -> str:
    return f"crc32c={crc32c_of(data)}"


def _media(target, headers, out) -> bool:
    out.write(response(DATA, X_Goog_Hash=_hash(DATA)))
    return True


def test_a_connection_the_server_closed_while_idle_is_never_sent_a_request(scripted_store):
    server = scripted_store(_media, idle_close_s=0.05)
    for _ in range(3):
        assert jsonapi.media("gs://b/a.jpg", None).data == DATA  # no retry around it
        server.wait_idle_closed()
    assert server.connections == 3
    assert all(len(requests) == 1 for requests in server.requests.values())


def test_threads_idle_between_shards_on_a_server_closing_idle_connections(scripted_store):
    server = scripted_store(_media, idle_close_s=0.05)
    failures = []

    def shard():
        try:
            for _ in range(3):
                jsonapi.media("gs://b/a.jpg", None)
        except Exception as error:  # noqa: BLE001 - counted, then asserted
            failures.append(error)

    for _ in range(3):
        threads = [threading.Thread(target=shard) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        server.wait_idle_closed()
    assert failures == []
    assert sum(map(len, server.requests.values())) == 3 * 8 * 3


@pytest.mark.parametrize(
    "answer",
    [
        response(DATA, Connection="close", X_Goog_Hash=_hash(DATA)),
        response(DATA, X_Goog_Hash=_hash(DATA)).replace(b"HTTP/1.1", b"HTTP/1.0", 1),
    ],
    ids=["connection-close", "http-1.0"],
)
def test_answers_that_close_the_connection_leave_the_next_request_a_new_one(scripted_store, answer):
    def close(target, headers, out) -> bool:
        out.write(answer)
        return False

    server = scripted_store(close)
    for _ in range(4):
        assert jsonapi.media("gs://b/a.jpg", None).data == DATA
    assert server.connections == 4


def test_a_body_that_stalls_fails_transiently_after_the_timeout(scripted_store, monkeypatch):
    monkeypatch.setattr(connection, "TIMEOUT_S", 0.2)
    stalled = threading.Event()

    def stall(target, headers, out) -> bool:
        head = response(DATA, X_Goog_Hash=_hash(DATA))
        out.write(head[: len(head) - len(DATA) // 2])
        out.flush()
        stalled.wait(5)
        return False

    scripted_store(stall)
    for limit in (None, len(DATA)):
        with pytest.raises(Exception) as raised:
            jsonapi.media("gs://b/a.jpg", limit)
        assert retry.is_transient(raised.value)
    stalled.set()


@pytest.mark.parametrize("limit", [None, len(DATA)])
@pytest.mark.parametrize("announced", [True, False], ids=["hashed", "no-hash"])
def test_a_body_shorter_than_its_content_length_is_a_transient_failure(
    scripted_store, limit, announced
):
    def cut(target, headers, out) -> bool:
        hashed = {"X_Goog_Hash": _hash(DATA)} if announced else {}
        out.write(response(DATA, **hashed)[: -len(DATA) // 3])
        return False

    scripted_store(cut)
    with pytest.raises(Exception) as raised:
        jsonapi.media("gs://b/a.jpg", limit)
    assert retry.is_transient(raised.value)


def test_a_body_longer_than_its_content_length_is_cut_there_and_the_next_request_is_whole(
    scripted_store,
):
    def long(target, headers, out) -> bool:
        head = response(DATA, X_Goog_Hash=_hash(DATA))
        out.write(head + b"trailing garbage")
        return True

    scripted_store(long)
    for _ in range(3):
        assert jsonapi.media("gs://b/a.jpg", None).data == DATA


def _chunked(data: bytes) -> bytes:
    pieces = [data[i : i + 5000] for i in range(0, len(data), 5000)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def test_a_chunked_body_without_a_length_is_read_whole_or_refused_over_the_limit(scripted_store):
    def chunked(target, headers, out) -> bool:
        out.write(response(_chunked(DATA), Transfer_Encoding="chunked", X_Goog_Hash=_hash(DATA)))
        return True

    server = scripted_store(chunked)
    assert jsonapi.media("gs://b/a.jpg", None).data == DATA
    assert jsonapi.media("gs://b/a.jpg", len(DATA)).data == DATA
    assert jsonapi.media("gs://b/a.jpg", len(DATA) - 1) is None
    assert jsonapi.media("gs://b/a.jpg", len(DATA)).data == DATA
    assert sum(map(len, server.requests.values())) == 4


def _range_answer(honour: bool):
    def answer(target, headers, out) -> bool:
        if "alt=media" not in target:
            out.write(response(b'{"size": "%d", "crc32c": "x", "generation": "1"}' % len(DATA)))
            return True
        start, end = map(int, headers["range"].removeprefix("bytes=").split("-"))
        if honour:
            span = f"bytes {start}-{end}/{len(DATA)}"
            out.write(response(DATA[start : end + 1], "206 Partial Content", Content_Range=span))
        else:
            out.write(response(DATA, X_Goog_Hash=_hash(DATA)))
        return True

    return answer


def test_a_range_is_read_from_its_206_answer(scripted_store):
    scripted_store(_range_answer(honour=True))
    assert io.BufferedReader(RangeReader("gs://b/m.csv"), 7000).read() == DATA


@pytest.mark.parametrize("buffer", [7000, 2 * len(DATA)])
def test_a_server_ignoring_the_range_never_gives_other_bytes_than_those_asked(
    scripted_store, buffer
):
    scripted_store(_range_answer(honour=False))
    reader = io.BufferedReader(RangeReader("gs://b/m.csv"), buffer)
    reader.seek(100)
    with pytest.raises(OSError, match="Range"):
        reader.read(10)


def _ranges_cut_once(cut_at: int, asked: list):
    """Answers ranges of DATA (recording each Range asked), cutting the body of the first that
    covers byte `cut_at` there, its connection closed."""
    cut = []

    def answer(target, headers, out) -> bool:
        if "alt=media" not in target:
            return _range_answer(honour=True)(target, headers, out)
        asked.append(headers["range"])
        start, end = map(int, headers["range"].removeprefix("bytes=").split("-"))
        span = f"bytes {start}-{end}/{len(DATA)}"
        whole = response(DATA[start : end + 1], "206 Partial Content", Content_Range=span)
        if start <= cut_at <= end and not cut:
            cut.append(cut_at)
            out.write(whole[: len(whole) - (end + 1 - cut_at)])
            return False
        out.write(whole)
        return True

    return answer


def test_a_read_from_the_start_is_one_request_asked_again_from_where_a_cut_stopped_it(
    scripted_store, monkeypatch
):
    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0)
    asked = []
    server = scripted_store(_ranges_cut_once(17000, asked))
    with io.BufferedReader(RangeReader("gs://b/m.csv"), 7000) as reader:
        assert b"".join(iter(lambda: reader.read(7000), b"")) == DATA
    end = len(DATA) - 1
    assert asked == [f"bytes=0-{end}", f"bytes=17000-{end}"]
    assert len(server.requests) == 3  # the stat's; the reader's own, made again once cut


def test_a_seek_elsewhere_leaves_the_answer_unread_and_asks_the_bytes_there(scripted_store):
    asked = []
    scripted_store(_ranges_cut_once(-1, asked))
    with io.BufferedReader(RangeReader("gs://b/m.csv"), 7000) as reader:
        assert reader.seek(30000) == 30000 and reader.read(5) == DATA[30000:30005]
        assert reader.read(7000) == DATA[30005:37005]  # where that range ended: the rest
        assert reader.seek(100) == 100 and reader.read(5) == DATA[100:105]
        assert reader.seek(0) == 0 and reader.read(7000) == DATA[:7000]
        assert reader.raw.read(0) == b""
    end = len(DATA) - 1
    assert asked == ["bytes=30000-36999", f"bytes=37000-{end}", "bytes=100-7099", f"bytes=0-{end}"]


@pytest.fixture
def busy_fds():
    """A process holding more than 1,024 open files, as a worker with many threads, shards and
    connections does: the next socket's number is over select()'s limit."""
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    yield
    for fd in fds:
        os.close(fd)


def test_a_connection_numbered_over_1024_is_reused(scripted_store, busy_fds):
    server = scripted_store(_media)
    for _ in range(3):
        assert jsonapi.media("gs://b/a.jpg", None).data == DATA
    assert server.connections == 1


def test_a_host_name_not_resolved_is_a_transient_failure(monkeypatch):
    """DNS failing on the way, as requests (a ConnectionError) told Google's clients."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://no-such-host.invalid:80")
    with pytest.raises(OSError) as raised:
        jsonapi.media("gs://b/a.jpg", None)
    assert retry.is_transient(raised.value)


def _port() -> int:
    """The client's port of this thread's connection: which connection the last request took."""
    return connection.connection().sock.getsockname()[1]


def _read_in_child(ports) -> None:
    jsonapi.media("gs://b/child.jpg", None)
    jsonapi.media("gs://b/child.jpg", None)
    ports.put(_port())


def test_a_forked_process_never_sends_on_the_connection_its_parent_made(scripted_store):
    """As the local runner's shard writers are forked after the parent read a gs:// manifest:
    two processes writing on one socket would get each other's answers."""
    server = scripted_store(_media)
    assert jsonapi.media("gs://b/parent.jpg", None).data == DATA
    parents = _port()
    context = multiprocessing.get_context("fork")
    ports = context.SimpleQueue()
    child = context.Process(target=_read_in_child, args=(ports,))
    child.start()
    child.join()
    assert child.exitcode == 0
    childs = ports.get()
    assert jsonapi.media("gs://b/parent.jpg", None).data == DATA  # its own connection intact
    assert _port() == parents != childs
    by_port = {server.ports[n]: [t for t, _ in server.requests[n]] for n in server.requests}
    assert sorted(by_port[parents]) == ["/download/storage/v1/b/b/o/parent.jpg?alt=media"] * 2
    assert sorted(by_port[childs]) == ["/download/storage/v1/b/b/o/child.jpg?alt=media"] * 2
    assert server.connections == 2


def _forwarding(emulator_port: int):
    """An answer that is the emulator's to the same GET, its body whole."""

    def forward(target, headers, out) -> bool:
        kept = {k: v for k, v in headers.items() if k not in ("host", "connection")}
        emulator = http.client.HTTPConnection("127.0.0.1", emulator_port, timeout=30)
        emulator.request("GET", target, headers=kept)
        answer = emulator.getresponse()
        data = answer.read()
        emulator.close()
        out.write(f"HTTP/1.1 {answer.status} {answer.reason}\r\n".encode("latin-1"))
        for name, value in answer.getheaders():
            if name.lower() not in ("connection", "transfer-encoding", "content-length"):
                out.write(f"{name}: {value}\r\n".encode("latin-1"))
        out.write(f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        return True

    return forward


def test_shard_writers_forked_after_a_gs_manifest_read_never_share_its_connection(
    tmp_path, gcs, scripted_store
):
    """The local runner reads a gs:// manifest here and its forked shard writers read the
    images (it forks them first of all, before any request): no connection the store saw
    carries both, and no request was sent twice."""
    write_manifest(tmp_path / "src" / "manifest.csv", make_images(tmp_path / "src", per_class=5))
    source = gcs(tmp_path / "src", f"fork-{tmp_path.name}")
    server = scripted_store(_forwarding(gcs.port))
    argv = f"--manifest {source}/manifest.csv --output {tmp_path / 'out'} --no_progress"
    info = run([*argv.split(), "--num_shards", "4", "--processes", "2", "--threads", "2"]).info
    assert info.records == 20
    kinds = [
        {"manifest" if "manifest.csv" in target else "image" for target, _ in requests}
        for requests in server.requests.values()
    ]
    assert {"manifest"} in kinds and {"image"} in kinds
    assert {"manifest", "image"} not in kinds
    targets = [target for requests in server.requests.values() for target, _ in requests]
    media = [t for t in targets if "alt=media" in t and "manifest" not in t]
    assert len(media) == len(set(media)) == 20


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_256_threads_keep_a_connection_each_and_leave_none_open_when_they_end(scripted_store):
    server = scripted_store(_media)
    # Files and sockets earlier tests in this worker left to the garbage collector, closed
    # now, not while this test counts.
    gc.collect()
    before = _open_fds()
    for _ in range(2):  # a thread pool per shard, as a shard writer's pool may be
        with concurrent.futures.ThreadPoolExecutor(256) as pool:
            reads = [pool.submit(jsonapi.media, "gs://b/a.jpg", None) for _ in range(1024)]
            assert all(read.result().data == DATA for read in reads)
    server.wait_idle_closed()  # the server's ends of them are this process's fds too
    gc.collect()
    assert _open_fds() == before
    assert server.connections <= 2 * 256
    assert sum(map(len, server.requests.values())) == 2 * 1024


@pytest.mark.parametrize("crc32c", [crc32c_of(DATA), crc32c_of(DATA[1:])], ids=["whole", "damaged"])
def test_the_crc32c_is_found_in_x_goog_hash_sent_as_two_headers(scripted_store, crc32c):
    """Cloud Storage may send each hash in an X-Goog-Hash header of its own, md5 first."""

    def two_headers(target, headers, out) -> bool:
        head = response(DATA, X_Goog_Hash="md5=M3Zs1IDeBqay4FPrj2dYPg==")
        second = f"\r\nX-Goog-Hash: crc32c={crc32c}\r\n\r\n".encode()
        out.write(head.replace(b"\r\n\r\n", second, 1))
        return True

    scripted_store(two_headers)
    if crc32c == crc32c_of(DATA):
        assert jsonapi.media("gs://b/a.jpg", None).data == DATA
    else:
        with pytest.raises(retry.CorruptTransferError):
            jsonapi.media("gs://b/a.jpg", None)
