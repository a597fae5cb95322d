"""transforms/storage/joins.py: a file made of others, streamed locally (tests/test_fileio.py
checks that path) or composed by Cloud Storage in one request, sent again by the one retry
layer."""

import random
from pathlib import Path

import google_crc32c
import pytest

from tfrecord_pipeline.transforms.storage import joins, retry


def _parts(tmp_path, gcs) -> tuple[str, list[bytes]]:
    """COMPOSE_LIMIT small objects `part-NN` in a folder of the bucket: (its gs:// path, their
    bytes)."""
    parts = [bytes([index]) * (index + 1) for index in range(joins.COMPOSE_LIMIT)]
    for index, data in enumerate(parts):
        (tmp_path / f"part-{index:02d}").write_bytes(data)
    return gcs(tmp_path, f"{tmp_path.name}-joins"), parts


def test_a_compose_failing_on_the_way_is_sent_again_by_the_one_retry_layer(
    tmp_path, gcs, faulty_gcs
):
    """Each attempt one request: a 503, a dropped connection or a lost answer (the object made
    all the same) fail the first two, the third makes the same object."""
    folder, parts = _parts(tmp_path, gcs)
    prefix = folder.removeprefix("gs://tfrp-test/")
    proxy = faulty_gcs(prefix, rate=1.0, copies_too=True)
    sources = [f"{folder}/part-{index:02d}" for index in range(len(parts))]
    crc = joins.compose(sources, f"{folder}/joined")
    joined = gcs.bucket.blob(f"{prefix}/joined").download_as_bytes()
    assert joined == b"".join(parts) and crc == google_crc32c.value(joined)
    assert proxy.requests["POST", f"{prefix}/joined/compose"] == 3
    assert sum(proxy.faults.values()) == 2
    with pytest.raises(ValueError, match="33 objects, over the 32 a compose joins"):
        joins.compose([*sources, "gs://tfrp-test/one-more"], f"{folder}/joined")


def test_a_compose_that_keeps_failing_is_attempted_as_the_budget_allows(tmp_path, gcs, faulty_gcs):
    folder, parts = _parts(tmp_path, gcs)
    prefix = folder.removeprefix("gs://tfrp-test/")
    always = {f"{prefix}/joined/compose": "503"}
    proxy = faulty_gcs(prefix, always=always, copies_too=True)
    with pytest.raises(retry.StoreUnavailableError):
        joins.compose([f"{folder}/part-00"], f"{folder}/joined")
    assert proxy.requests["POST", f"{prefix}/joined/compose"] == retry.ATTEMPTS


def test_a_compose_of_a_missing_object_is_file_not_found(tmp_path, gcs):
    folder, _ = _parts(tmp_path, gcs)
    with pytest.raises(FileNotFoundError):
        joins.compose([f"{folder}/part-00", f"{folder}/no-such-part"], f"{folder}/joined")


def test_compose_on_the_store_gives_the_parts_bytes_in_order_and_their_crc32c(tmp_path, gcs):
    folder, parts = _parts(tmp_path, gcs)
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


@pytest.mark.parametrize("sizes", [(0, 0), (0, 5), (7, 0), (1, 1), (100, 3), (4096, 65537)])
def test_crc32c_combine_gives_the_crc_of_the_bytes_one_after_the_other(sizes):
    first, second = (bytes(random.Random(size).randbytes(size)) for size in sizes)
    combined = joins.crc32c_combine(
        google_crc32c.value(first), google_crc32c.value(second), len(second)
    )
    assert combined == google_crc32c.value(first + second)


def test_a_local_join_given_its_parts_crcs_reads_none_of_them(tmp_path, monkeypatch):
    parts = [b"x" * 1000, b"", b"yz" * 3000]
    sources = []
    for index, data in enumerate(parts):
        sources.append(str(tmp_path / f"piece-{index}"))
        Path(sources[-1]).write_bytes(data)
    crcs = [google_crc32c.value(data) for data in parts]
    monkeypatch.setattr(google_crc32c, "extend", None)  # a read would checksum
    assert joins.join_files(sources, str(tmp_path / "joined"), crcs) == google_crc32c.value(
        b"".join(parts)
    )
    assert (tmp_path / "joined").read_bytes() == b"".join(parts)
