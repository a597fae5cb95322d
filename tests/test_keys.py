"""transforms/keys.py: the salted key hashes every split, shard and order decision rests on."""

from tfrecord_pipeline.transforms.keys import (
    ORDER_SALT,
    SHARD_SALT,
    SPLIT_SALT,
    key_hash,
    unit_interval,
)


def test_a_keys_hash_is_pinned_so_no_change_moves_a_row_to_another_split_or_shard():
    assert key_hash("cat/1.jpg", SHARD_SALT) == 16763252772935691751
    assert key_hash("cat/1.jpg", SPLIT_SALT) == 578668867960451635


def test_salts_make_the_decisions_independent():
    keys = [f"img{n}.jpg" for n in range(2000)]
    split_low = {key for key in keys if unit_interval(key, SPLIT_SALT) < 0.5}
    order_low = {key for key in keys if unit_interval(key, ORDER_SALT) < 0.5}
    assert 900 < len(split_low) < 1100  # uniform
    assert 400 < len(split_low & order_low) < 600  # and unrelated to another salt's
    assert all(0 <= unit_interval(key, SHARD_SALT) < 1 for key in keys)
