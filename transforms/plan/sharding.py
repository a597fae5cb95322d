"""The shard plan: which shard a row goes to, in what order, and how many shards a split gets.

Everything here is a pure function of row keys and sizes, so the same manifest and options give
the same shards on any runner, any number of workers and any bundle boundaries (the keys'
salted hashes: transforms/keys.py).
"""

import math
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.keys import ORDER_SALT, SHARD_SALT, key_hash
from tfrecord_pipeline.transforms.manifest.rows import OFFSET_MASK, ManifestRow, manifest_number
from tfrecord_pipeline.transforms.manifest.splits import SPLIT_RULE, is_split_name
from tfrecord_pipeline.transforms.storage.joins import COMPOSE_LIMIT

DEFAULT_TARGET_SHARD_MB = 150
ARCHIVE_ORDERS = ("mix", "keep")  # --archive_order: by key hash, or as each archive holds them
MAX_SHARDS = 99999  # five digits in the file name
MAX_PIECES = COMPOSE_LIMIT  # a shard's pieces are joined by one compose request
# A piece the local runner cuts only to share a shard over its cores holds at least this many
# rows: a smaller one is over before its join's cost is repaid.
MIN_SHARED_PIECE_ROWS = 500
# A local writer holds at most this many rows (~4 MB) at once, sorted into record order: a
# piece with more is written in runs of them (`piece_runs`).
MAX_RUN_ROWS = 10_000


class ShardCounts(NamedTuple):
    """`--num_shards`: one count for every split, counts per split, or neither (size-based)."""

    every_split: int | None = None
    per_split: tuple[tuple[str, int], ...] = ()

    def for_split(self, split: str) -> int | None:
        return dict(self.per_split).get(split, self.every_split)


def parse_shard_counts(text: str | None) -> ShardCounts:
    """`8` or `train=64,validation=8`."""
    if not text:
        return ShardCounts()
    try:
        if "=" not in text:
            counts = ShardCounts(every_split=int(text))
            values = [counts.every_split]
        else:
            pairs = [part.split("=") for part in text.split(",")]
            counts = ShardCounts(per_split=tuple((name.strip(), int(n)) for name, n in pairs))
            values = [n for _, n in counts.per_split]
    except ValueError:
        raise UserError(f"--num_shards: expected N or split=N,... got {text!r}") from None
    if not all(1 <= n <= MAX_SHARDS for n in values):
        raise UserError(f"--num_shards: counts must be between 1 and {MAX_SHARDS}")
    if any(not is_split_name(name) for name, _ in counts.per_split):
        raise UserError(f"--num_shards: split names are {SPLIT_RULE}; got {text!r}")
    return counts


class ShardId(NamedTuple):
    """One output file: shard `index` of `count` in `split`."""

    split: str
    index: int
    count: int

    def file_name(self, suffix: str) -> str:
        """Its file's name, ending in its format's `suffix` (transforms/write/formats.py)."""
        return f"{self.split}-{self.index:05d}-of-{self.count:05d}{suffix}"


def shard_for(key: str, split: str, num_shards: int) -> ShardId:
    """Hash partitioning: every shard gets a uniform mix of labels and sources."""
    return ShardId(split, key_hash(key, SHARD_SALT) % num_shards, num_shards)


def record_order(key: str) -> tuple[int, str]:
    """Sort key of a record inside its shard: a fixed pseudo-random order that mixes labels."""
    return (key_hash(key, ORDER_SALT), key)


def kept_point(number: int, offset: int, size: int, manifests: int, count: int) -> tuple[int, int]:
    """`--archive_order keep`: where the member at byte `offset` of manifest number `number`,
    an archive of `size` bytes, falls when the manifests are laid end to end, each an equal
    share of a split's `count` shards: its shard, and its place in it (a 64-bit fraction, as
    `record_order`'s hash is). A shard is then a run of whole archives, or a slice of one, read
    as one stream; exact integers, so every runner cuts at the same member."""
    shard, rest = divmod((number * size + offset) * count, manifests * size)
    return shard, (rest << 64) // (manifests * size)


def row_shard(row: ManifestRow, count: int) -> ShardId:
    """The row's shard among its split's `count`: by its key's hash, or (a member of an archive
    kept in order) by its place in the archive (`kept_point`)."""
    if not _is_kept(row):
        return shard_for(row.key, row.split, count)
    return ShardId(row.split, _kept(row, count)[0], count)


def row_order(row: ManifestRow, count: int) -> tuple[int, str]:
    """The row's sort key in its shard (of its split's `count`): `record_order`, or a kept
    member's place in its archive."""
    if not _is_kept(row):
        return record_order(row.key)
    return _kept(row, count)[1], row.key


def row_piece(row: ManifestRow, count: int, pieces: int) -> int:
    """The piece of its shard (of a split's `count`) the row goes to: `piece_of` its key, or
    a kept member's contiguous range of its place (0 of 1 piece either way)."""
    if not _is_kept(row):
        return piece_of(row.key, pieces)
    return _kept(row, count)[1] * pieces >> 64


def _is_kept(row: ManifestRow) -> bool:
    return row.member is not None and bool(row.member.kept)


def _kept(row: ManifestRow, count: int) -> tuple[int, int]:
    size, manifests = row.member.kept
    # A compressed tar's member lies in its unpacked copy, which may run past the archive's
    # size: its place is clamped into the archive's share.
    offset = min((row.position & OFFSET_MASK) - 1, size - 1)
    return kept_point(manifest_number(row), offset, size, manifests, count)


# The fewest records a shard read through its index should hold: the PyTorch tfrecord
# package's index reader fails on a shard of 0 or 1 (`IndexError: too many indices for array`,
# its index loaded as a 1-D array); `--write_index` sizes shards and warns by it.
LEAST_INDEXED_RECORDS = 2


def shards_left_full(records: int, least: int = 1) -> int:
    """The most shards that `records` hashed records are unlikely to leave one of with fewer
    than `least` records (1: empty): the largest n whose expected number of such shards,
    n P(Binomial(records, 1/n) < least), is under 1/20 (which bounds the chance of any)."""
    shards = 1
    while (n := shards + 1) * _fewer_than(least, records, n) < 1 / 20:
        shards = n
    return shards


def _fewer_than(least: int, records: int, shards: int) -> float:
    """The chance that a shard of `shards` gets fewer than `least` of `records` hashed records."""
    p = 1 / shards
    return sum(math.comb(records, k) * p**k * (1 - p) ** (records - k) for k in range(least))


def shards_for_bytes(
    estimated_bytes: float, target_shard_mb: float, records: int = 0, least: int = 0
) -> int:
    """How many shards keep each near `target_shard_mb`; at least one. With `least`, no more
    than `records` hashed records are unlikely to leave one of with fewer than `least` in (a
    split of fewer records than that: any count)."""
    target = target_shard_mb * 1024 * 1024
    count = max(1, min(MAX_SHARDS, math.ceil(estimated_bytes / target)))
    return min(count, shards_left_full(records, least)) if 0 < least <= records else count


class Piece(NamedTuple):
    """Part `index` of the `count` a shard is written in on Beam (see `piece_of`)."""

    index: int = 0
    count: int = 1


WHOLE = Piece()


def pieces_for(shard_bytes: float, target_shard_mb: float) -> int:
    """How many pieces a shard is written in so that none is far over `target_shard_mb`: a
    shard that `--num_shards` makes large is then no single all-or-nothing unit of work."""
    target = target_shard_mb * 1024 * 1024
    return max(1, min(MAX_PIECES, math.ceil(shard_bytes / target)))


def local_pieces(shard_rows: int, total_rows: int, processes: int) -> int:
    """How many pieces the local runner writes a shard in, each by a writer of its own, joined
    after: about as many as its rows are shares of the run's (`total_rows / processes`), so
    that a shard of tiny images that one core would write alone while the others wait is
    written by all of them (a shard near its share stays whole)."""
    shares = round(shard_rows * processes / total_rows) if processes > 1 and total_rows else 1
    shared = min(shares, shard_rows // MIN_SHARED_PIECE_ROWS)
    return max(1, min(shared, MAX_PIECES))


def piece_runs(piece_rows: int) -> int:
    """How many runs a local writer writes a piece of `piece_rows` rows in, one after another
    into the piece's one file, each a contiguous range of record order sorted alone: enough
    that it never holds over MAX_RUN_ROWS rows. Unlike pieces, runs are never joined: their
    bytes are written once."""
    return max(1, math.ceil(piece_rows / MAX_RUN_ROWS))


def piece_of(key: str, pieces: int) -> int:
    """The piece of its shard a record goes to: a contiguous range of `record_order`, so the
    pieces, each in record order, joined in piece order, are the shard written whole, byte for
    byte (duplicate keys, which share their hash, meet in one piece). A shard written whole
    is one piece: its rows are not hashed for it (most shards; a hash is a row's sha256)."""
    return key_hash(key, ORDER_SALT) * pieces >> 64 if pieces > 1 else 0
