"""Stable salted hashes of row keys: the split, shard, order and errors-file decisions.

Each decision hashes a row's key with a salt of its own, so the decisions are independent of
one another (a row's split says nothing of its shard), and every one is the same on any runner,
process or Python version.
"""

import hashlib

SPLIT_SALT = "split"
SHARD_SALT = "shard"
ORDER_SALT = "order"
BUCKET_SALT = "bucket"  # the local runner's buckets of rows to group (and of digests)


def key_hash(key: str, salt: str) -> int:
    """A 64-bit hash of `key`, stable across processes and Python versions (unlike `hash`)."""
    digest = hashlib.sha256(f"{salt}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def unit_interval(key: str, salt: str) -> float:
    """The key's hash as a float in [0, 1)."""
    return key_hash(key, salt) / 2.0**64
