"""The local runner's shard files flushed to their disk on the run's threads
(transforms/local/flushes.py): every file of every result, and a flush that fails fails the
stage."""

import pytest

from tfrecord_pipeline.transforms.local.flushes import Flushes, staged_files
from tfrecord_pipeline.transforms.plan.sharding import Piece
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult


def _result(staged: str, index_file: str = "") -> ShardResult:
    return ShardResult(
        "train", 0, 1, "train-00000-of-00001.tfrecord", 1, 10, "crc", (), index_file, staged
    )


def test_a_results_shard_rows_and_index_files_are_flushed(tmp_path):
    staged = _result("s.tfrecord.a1", index_file="index/train-00000-of-00001.tfrecord.idx")
    names = [path.rsplit("/", 1)[1] for path in staged_files(staged, str(tmp_path))]
    assert names == ["s.tfrecord.a1", "s.tfrecord.a1.rows", "s.tfrecord.a1.idx"]
    assert len(staged_files(_result("s.tfrecord.a1"), str(tmp_path))) == 2
    for path in staged_files(staged, str(tmp_path)):
        (tmp_path / path.rsplit("/", 1)[1]).write_bytes(b"x")
    with Flushes(str(tmp_path)) as flushes:
        assert flushes.flushed(staged) is staged
        assert flushes.flushed("an error row passes by") == "an error row passes by"


def test_a_file_that_cannot_be_flushed_fails_the_stage(tmp_path):
    with pytest.raises(FileNotFoundError), Flushes(str(tmp_path)) as flushes:
        flushes.flushed(_result("gone.tfrecord.a1"))


def test_on_an_object_store_a_write_is_already_persisted():
    with Flushes("gs://bucket/data/_staging/v1") as flushes:
        flushes.flushed(_result("s.tfrecord.a1"))


def test_a_pieces_files_are_left_to_the_join_that_flushes_its_shard(tmp_path):
    piece = _result("piece.tfrecord.a1")._replace(piece=Piece(0, 2))
    with Flushes(str(tmp_path)) as flushes:  # its files are not there: nothing asks for them
        assert flushes.flushed(piece) is piece
