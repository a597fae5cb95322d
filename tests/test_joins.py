"""transforms/storage/joins.py: a file made of others, streamed locally (tests/test_fileio.py
checks that path) or composed by Cloud Storage in one request, sent again by the one retry
layer."""

import base64

import google_crc32c
import pytest
from google.api_core import exceptions as api

from tfrecord_pipeline.transforms.storage import gcs, joins, retry


class _Blob:
    """The parts of a storage Blob that compose touches."""

    def __init__(self, name: str, requests: list, failures: list):
        self.name, self.crc32c = name, None
        self._requests, self._failures = requests, failures

    def compose(self, parts, retry="the client's", timeout=None):
        self._requests.append(([part.name for part in parts], retry))
        if self._failures:
            raise self._failures.pop(0)
        self.crc32c = base64.b64encode((1234).to_bytes(4, "big")).decode()


class _Client:
    def __init__(self, failures: list):
        self.requests, self._failures = [], failures

    def bucket(self, name: str):
        return self

    def blob(self, name: str) -> _Blob:
        return _Blob(name, self.requests, self._failures)


def test_a_compose_is_one_request_sent_again_by_the_one_retry_layer(monkeypatch):
    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0)
    client = _Client([api.ServiceUnavailable("backend")])
    monkeypatch.setattr(gcs, "client", lambda: client)
    sources = [f"gs://b/part-{index:02d}" for index in range(joins.COMPOSE_LIMIT)]
    assert joins.compose(sources, "gs://b/shard") == 1234
    names = [f"part-{index:02d}" for index in range(joins.COMPOSE_LIMIT)]
    assert client.requests == [(names, None), (names, None)]  # the client's own retries off
    with pytest.raises(ValueError, match="33 objects, over the 32 a compose joins"):
        joins.compose([*sources, "gs://b/one-more"], "gs://b/shard")


def test_compose_on_the_store_gives_the_parts_bytes_in_order_and_their_crc32c(tmp_path, gcs):
    parts = [bytes([index]) * (index + 1) for index in range(joins.COMPOSE_LIMIT)]
    for index, data in enumerate(parts):
        (tmp_path / f"part-{index:02d}").write_bytes(data)
    folder = gcs(tmp_path, f"{tmp_path.name}-joins")
    sources = [f"{folder}/part-{index:02d}" for index in range(len(parts))]
    crc = joins.join_files(sources, f"{folder}/joined")
    joined = gcs.bucket.blob(f"{tmp_path.name}-joins/joined").download_as_bytes()
    assert joined == b"".join(parts) and crc == google_crc32c.value(joined)


@pytest.mark.parametrize("chunk", [2, joins.JOIN_CHUNK_BYTES])
def test_a_local_join_makes_the_destinations_folder(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(joins, "JOIN_CHUNK_BYTES", chunk)
    (tmp_path / "a").write_bytes(b"abc")
    destination = tmp_path / "new" / "folder" / "joined"
    assert joins.join_files([str(tmp_path / "a")] * 2, str(destination)) == google_crc32c.value(
        b"abcabc"
    )
    assert destination.read_bytes() == b"abcabc"
