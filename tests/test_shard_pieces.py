"""transforms/write/shard_pieces.py: pieces of a shard, written apart, joined into the file the
shard written whole would be; without Beam."""

import pytest
from conftest import make_images

from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.plan.sharding import WHOLE, Piece, ShardId, piece_of
from tfrecord_pipeline.transforms.write.formats import ShardFormat
from tfrecord_pipeline.transforms.write.shard_pieces import join_pieces, join_staged
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig, write_shard

PIECES = 3
FORMATS = [ShardFormat(), ShardFormat(compression="gzip"), ShardFormat("array_record")]


def _whole_and_pieces(tmp_path, shard_format):
    """A shard written whole and in PIECES pieces (last first) into tmp_path/staging."""
    images = make_images(tmp_path, per_class=4)
    rows = [
        ManifestRow(
            f"k{n}", str(tmp_path / image["image_uri"]), image["label"], "train", (), "m", n
        )
        for n, image in enumerate(images)
    ]
    labels = LabelMap(tuple(sorted({row.label for row in rows})))
    index = shard_format.concatenates  # DALI's index: uncompressed TFRecord only
    config = WriteConfig(str(tmp_path / "staging"), shard_format=shard_format, write_index=index)
    shard = ShardId("train", 0, 1)
    [whole] = write_shard(shard, rows, labels, config)
    parts = []
    for index in reversed(range(PIECES)):  # in any order: each knows its place
        piece_rows = [row for row in rows if piece_of(row.key, PIECES) == index]
        [part] = write_shard(shard, piece_rows, labels, config, piece=Piece(index, PIECES))
        parts.append(part)
    assert all(part.records for part in parts)  # every piece holds some of the shard
    return whole, parts


@pytest.mark.parametrize("shard_format", FORMATS, ids=str)
def test_joined_pieces_are_the_shard_written_whole(tmp_path, shard_format):
    whole, parts = _whole_and_pieces(tmp_path, shard_format)
    staging = tmp_path / "staging"
    index = shard_format.concatenates
    ordered = sorted(parts, key=lambda part: part.piece.index)
    joined = join_staged(ordered, str(staging), shard_format)

    assert joined.piece == WHOLE
    assert joined._replace(staged=whole.staged) == whole
    for suffix in ["", ".rows", *([".idx"] if index else [])]:
        assert (staging / (joined.staged + suffix)).read_bytes() == (
            staging / (whole.staged + suffix)
        ).read_bytes()
    assert all((staging / part.staged).exists() for part in parts)  # left for a retried join


def test_pieces_are_appended_to_their_shard_as_they_come_in_order(tmp_path):
    """Before the last piece comes, those before it are in the shard's file already: the join
    is done while the others are written, into the bytes of the shard written whole."""
    whole, parts = _whole_and_pieces(tmp_path, ShardFormat())
    staging = tmp_path / "staging"
    last, middle, first = parts  # written last first
    other = whole._replace(index=1, count=2, staged="other-shard")  # whole: passed on

    so_far = [(staging / part.staged).read_bytes() for part in (first, middle)]

    def coming():
        yield middle
        assert not list(staging.glob("*.joined.*"))  # piece 0 has not come
        yield other
        yield first
        (early,) = staging.glob("*.joined.*")
        assert early.read_bytes() == b"".join(so_far)
        assert not (staging / first.staged).exists()  # its file became the shard's
        yield last

    passed, joined = join_pieces(coming(), str(staging), ShardFormat())
    assert passed == other and joined._replace(staged=whole.staged) == whole
    for suffix in ["", ".rows", ".idx"]:
        assert (staging / (joined.staged + suffix)).read_bytes() == (
            staging / (whole.staged + suffix)
        ).read_bytes()
