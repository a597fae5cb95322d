"""transforms/plan/sharding.py: each row's shard and place in it from its key, shard file names,
and pieces as ranges of the record order."""

from collections import Counter

from tfrecord_pipeline.transforms.plan.sharding import (
    MAX_RUN_ROWS,
    MIN_SHARED_PIECE_ROWS,
    ShardId,
    kept_point,
    local_pieces,
    piece_of,
    piece_runs,
    record_order,
    shard_for,
)


def test_shards_mix_labels_and_order_is_deterministic():
    keys = [f"{label}/{i}.jpg" for label in "abcd" for i in range(400)]
    shards = Counter(shard_for(key, "train", 8).index for key in keys)
    assert sorted(shards) == list(range(8))
    assert max(shards.values()) < 1.25 * len(keys) / 8
    in_shard = sorted((k for k in keys if shard_for(k, "train", 8).index == 0), key=record_order)
    assert len({k[0] for k in in_shard[:20]}) == 4  # the first records already mix all labels


def test_shard_file_names():
    assert ShardId("train", 3, 8).file_name(".tfrecord") == "train-00003-of-00008.tfrecord"
    assert ShardId("val", 0, 1).file_name(".tfrecord.gz") == "val-00000-of-00001.tfrecord.gz"


def test_pieces_are_ranges_of_the_record_order():
    """Each piece in record order, the pieces in piece order: the whole shard's order."""
    keys = [f"key-{n}" for n in range(2000)]
    in_order = sorted(keys, key=record_order)
    pieces = [piece_of(key, 7) for key in in_order]
    assert pieces == sorted(pieces) and set(pieces) == set(range(7))
    assert all(piece_of(key, 1) == 0 for key in keys)


def test_a_shard_over_its_share_of_the_cores_is_written_in_pieces():
    """Tiny images in one shard on 2 cores: 2 pieces; shards near their share stay whole."""
    assert local_pieces(9_000, 9_000, 2) == 2
    assert local_pieces(9_000, 9_000, 8) == 8
    assert local_pieces(9_000, 9_100, 2) == 2  # beside a small validation shard
    assert local_pieces(4_600, 9_000, 2) == 1  # two shards for two cores
    assert local_pieces(9_000, 9_000, 1) == 1
    assert local_pieces(0, 0, 2) == 1
    small = 2 * MIN_SHARED_PIECE_ROWS - 1  # no piece under the minimum
    assert local_pieces(small, small, 2) == 1
    assert local_pieces(10 * MAX_RUN_ROWS, 40 * MAX_RUN_ROWS, 2) == 1
    assert local_pieces(10 * MAX_RUN_ROWS + 1, 10 * MAX_RUN_ROWS + 1, 1) == 1


def test_a_writer_never_holds_more_than_a_runs_rows():
    """A piece of more rows is written in runs, one after another, not in pieces to join: a
    join copies every byte once more."""
    assert piece_runs(0) == piece_runs(MAX_RUN_ROWS) == 1
    assert piece_runs(10 * MAX_RUN_ROWS + 1) == 11


def test_kept_members_cut_the_archives_laid_end_to_end_into_equal_shares():
    """Two archives of 100 bytes, 4 shards: each archive gives two shards, cut at its middle;
    a member's place in its shard grows with its offset."""
    shards = [
        kept_point(number, offset, 100, 2, 4)[0] for number in (0, 1) for offset in (0, 49, 50, 99)
    ]
    assert shards == [0, 0, 1, 1, 2, 2, 3, 3]
    places = [kept_point(0, offset, 100, 2, 4)[1] for offset in range(0, 50, 7)]
    assert places == sorted(places) and places[0] == 0 and places[-1] < 1 << 64
