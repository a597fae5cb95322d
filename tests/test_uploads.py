"""transforms/storage/uploads.py against the GCS emulator, through the fault proxy
(tests/fault_proxy.py): whole uploads, conditional ones (the proxy checks the precondition as
Cloud Storage does; the emulator ignores it), and resumable uploads that go on from the
session's offset after a cut."""

import os

import pytest
from fault_proxy import LOST

from tfrecord_pipeline.transforms.storage import gcs, uploads
from tfrecord_pipeline.transforms.storage.answers import PreconditionFailedError

CHUNK = 256 << 10  # the least chunk a session takes


def _written(path: str, data: bytes, chunk_bytes: int = CHUNK) -> None:
    with uploads.ResumableUpload(path, chunk_bytes) as upload:
        for start in range(0, len(data), 10_000):  # as a shard is written: a record at a time
            upload.write(data[start : start + 10_000])


def test_a_conditional_write_is_made_only_over_the_generation_asked_for(faulty_gcs):
    faulty_gcs("cond/")
    path = "gs://tfrp-test/cond/LATEST"
    first = gcs.write(path, b"v1", if_generation_match=0)  # only if there is none
    with pytest.raises(PreconditionFailedError):
        gcs.write(path, b"v1 again", if_generation_match=0)
    second = gcs.write(path, b"v2", if_generation_match=first)
    with pytest.raises(PreconditionFailedError):
        gcs.write(path, b"v3", if_generation_match=first)  # a generation gone
    assert gcs.read_generation(path) == (b"v2", second)


def test_a_conditional_write_whose_answer_was_lost_is_refused_when_sent_again(faulty_gcs):
    """The write took effect; its answer was cut; the retry finds the generation moved on. The
    caller (a publication) is told so, and reads what is there."""
    faulty_gcs("lost/", first_upload={"lost/LATEST": "truncate"})
    path = "gs://tfrp-test/lost/LATEST"
    with pytest.raises(PreconditionFailedError):
        gcs.write(path, b"mine", if_generation_match=0)
    assert gcs.read_generation(path)[0] == b"mine"


def test_a_small_object_is_one_request_and_a_large_one_a_session(faulty_gcs):
    proxy = faulty_gcs("sizes/")
    _written("gs://tfrp-test/sizes/small", b"x" * 1000)
    assert proxy.requests["PUT", None] == 0  # one multipart upload, no session
    data = os.urandom(3 * CHUNK + 1234)
    _written("gs://tfrp-test/sizes/large", data)
    assert proxy.requests["PUT", None] == 4  # three whole chunks, then the rest
    assert gcs.read("gs://tfrp-test/sizes/large", None).data == data
    assert gcs.read("gs://tfrp-test/sizes/small", None).data == b"x" * 1000


@pytest.mark.parametrize("fault", ["drop", LOST, "503"])
def test_a_cut_chunk_is_sent_on_from_the_sessions_offset_not_from_the_start(faulty_gcs, fault):
    """The second and the last chunk fail (the emulator answers a session that holds nothing
    as if it held a byte, so the first is left alone); each is asked about and sent on, the
    shard whole and sent about once."""
    proxy = faulty_gcs("cut/", session_puts={1: fault, 4: fault})
    data = os.urandom(3 * CHUNK + 1234)
    _written("gs://tfrp-test/cut/shard", data)
    assert gcs.read("gs://tfrp-test/cut/shard", None).data == data
    assert proxy.faults[fault] == 2
    assert proxy.put_bytes <= len(data) + 2 * CHUNK  # at most the failed chunks again


def test_a_last_chunk_whose_answer_was_lost_is_found_made(faulty_gcs):
    proxy = faulty_gcs("last/", session_puts={1: LOST})
    data = os.urandom(CHUNK + 99)
    _written("gs://tfrp-test/last/shard", data)
    assert gcs.read("gs://tfrp-test/last/shard", None).data == data
    assert proxy.requests["PUT", None] == 3  # two chunks, the offset asked, nothing sent again
