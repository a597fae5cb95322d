"""Refreshing a dataset, decided before anything is written: which records of the published
version stay, and the new version's final shards, each made of sources (a published shard
carried whole, the records kept from one, the converted rows of a new shard). Pure functions:
transforms/local/refresh.py reads and checks the published files, and
transforms/write/carried.py stages and joins the new version's; on Beam the same
decisions are fed counts (transforms/beam/refresh.py).

A past record stays when exactly one row has its key with the record's fingerprint
(transforms/plan/fingerprints.py) and its shard passed its check (its file has the size and
CRC-32C its metadata gives); every other row is converted: new keys, changed rows, every row of
a repeated key, and the rows of a damaged shard. The new version's shards per split: the kept
past shards in their old order, then the converted rows' shards, about as full as the split's
past ones; once small shards pile up (`compaction_groups`) they are concatenated; all are
numbered `<split>-NNNNN-of-NNNNN` (what TFDS and the shard glob expect). Rows meet records by
key in transforms/plan/refresh_match.py.
"""

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.sharding import ShardId


def stays(row_fingerprints: list[str], past: str) -> bool:
    """Whether a past record's row is unchanged: exactly one row has its key, with the record's
    fingerprint (a repeated key converts every row of it again, as a full conversion would
    judge them)."""
    return len(row_fingerprints) == 1 and bool(past) and row_fingerprints[0] == past


class PastShard(NamedTuple):
    """A shard of the published version, as a refresh found it; a source of a new shard."""

    split: str
    file: str  # its name in the published version
    records: int
    kept: int  # its records whose rows are unchanged
    sound: bool  # its file has the size and CRC-32C its metadata gives; its rows file reads

    @property
    def whole(self) -> bool:
        """Carried as the file it is (else its kept records are written again)."""
        return self.kept == self.records


class NewRows(NamedTuple):
    """The converted rows the write plan gives `shard`: a source of a new shard."""

    shard: ShardId


class FinalShard(NamedTuple):
    shard: ShardId  # its name in the new version
    sources: tuple[PastShard | NewRows, ...]  # their records, concatenated in this order


class RefreshCounts(NamedTuple):
    """What a refresh made its version of, for the metadata and the summary."""

    carried: int  # records of published shards carried whole
    rewritten: int  # records kept from published shards written again
    converted: int  # rows converted: new, changed, and those of damaged shards
    damaged: tuple[str, ...]  # published shards that failed their check: never carried
    reconverted: int  # unchanged rows converted again, their shards being damaged
    dropped: int  # records of the published version not in this one: rows gone or changed
    # The new version's shards: a published shard carried as its file, one holding published
    # records written again (some dropped, or small shards compacted), one of converted rows.
    shards_carried: int
    shards_rewritten: int
    shards_new: int


class RefreshLayout(NamedTuple):
    plan: DatasetPlan  # the new version's (its shard counts)
    write_plan: DatasetPlan  # the shards of the converted rows (their rows by key hash)
    shards: tuple[FinalShard, ...]
    counts: RefreshCounts

    def past_sources(self) -> Iterator[tuple[PastShard, ShardId]]:
        """Each published shard records are kept from, and the final shard they go to."""
        for final in self.shards:
            for source in final.sources:
                if isinstance(source, PastShard):
                    yield source, final.shard


def refresh_layout(
    plan: DatasetPlan, past: Sequence[PastShard], converted: Mapping[str, int]
) -> RefreshLayout:
    """The new version's shards, from the full conversion's `plan`, the published shards (in
    their metadata's order) and the converted rows per split: counts only, as Beam can feed
    them. A split new in this version gets the shards a full conversion would give it."""
    by_split: dict[str, list[PastShard]] = {}
    for shard in past:
        by_split.setdefault(shard.split, []).append(shard)
    planned = dict(plan.shards)
    final, counts, new_counts = [], [], []
    for split, _ in plan.rows:
        shards, rows = by_split.get(split, []), converted.get(split, 0)
        asked = planned[split] if not shards else delta_shards(rows, shards)
        new, split_final = _split_shards(split, shards, rows, asked)
        if new:
            new_counts.append((split, new))
        counts.append((split, len(split_final)))
        final += split_final
    return RefreshLayout(
        plan._replace(shards=tuple(counts)),
        plan._replace(shards=tuple(new_counts)),
        tuple(final),
        _refresh_counts(past, converted, final),
    )


def _split_shards(
    split: str, past: list[PastShard], rows: int, asked: int
) -> tuple[int, list[FinalShard]]:
    """A split's final shards: its sound past shards that keep records, in order, then the
    `asked` new shards of its `rows` converted rows (one, empty, when nothing else stands in
    the split), small ones compacted; and how many new shards it got."""
    kept = [shard for shard in past if shard.sound and shard.kept]
    new = asked or (0 if kept else 1)  # a split of nothing still has its (empty) shard
    sources = [*kept, *(NewRows(ShardId(split, index, new)) for index in range(new))]
    sizes = [shard.kept for shard in kept] + spread(rows, new)
    parts = compacted(sources, compaction_groups(sizes))
    return new, [FinalShard(ShardId(split, i, len(parts)), part) for i, part in enumerate(parts)]


def _refresh_counts(
    past: Sequence[PastShard], converted: Mapping[str, int], final: Sequence[FinalShard]
) -> RefreshCounts:
    """What the refresh makes its version of, from the published shards, the converted rows
    and the final shards."""
    carried = [shard for shard in past if shard.sound and shard.kept]
    kinds = Counter(_shard_kind(shard.sources) for shard in final)
    return RefreshCounts(
        carried=sum(shard.records for shard in carried if shard.whole),
        rewritten=sum(shard.kept for shard in carried if not shard.whole),
        converted=sum(converted.values()),
        damaged=tuple(shard.file for shard in past if not shard.sound),
        reconverted=sum(shard.kept for shard in past if not shard.sound),
        dropped=sum(shard.records - shard.kept for shard in past),
        shards_carried=kinds["carried"],
        shards_rewritten=kinds["rewritten"],
        shards_new=kinds["new"],
    )


def _shard_kind(sources: tuple[PastShard | NewRows, ...]) -> str:
    """ "carried" (one published shard, whole), "new" (converted rows only), or "rewritten"."""
    if all(isinstance(source, NewRows) for source in sources):
        return "new"
    if len(sources) == 1 and sources[0].whole:
        return "carried"
    return "rewritten"


def delta_shards(rows: int, past: list[PastShard]) -> int:
    """Shards for a split's converted rows: about as full as its past shards, at least one,
    and no more than rows."""
    if not rows:
        return 0
    records = sum(shard.records for shard in past)
    per_shard = records / len(past) if records else rows
    return max(1, min(rows, round(rows / per_shard)))


def spread(rows: int, shards: int) -> list[int]:
    """The rows each of `shards` new shards is expected to get (hashing spreads them evenly):
    what compaction weighs them by, before a row is written."""
    return [rows // shards + (index < rows % shards) for index in range(shards)]


def compacted(sources: list, groups: list[list[int]]) -> list[tuple]:
    """The sources, one a shard, but for each group, whose sources make one shard."""
    merged = {group[0]: tuple(sources[index] for index in group) for group in groups}
    dropped = {index for group in groups for index in group[1:]}
    return [
        merged.get(index, (source,)) for index, source in enumerate(sources) if index not in dropped
    ]


def compaction_groups(records: list[int]) -> list[list[int]]:
    """Which of a split's shards (by their record counts, in order) to concatenate: once the
    small ones (under half the largest) hold half a full shard together, they are packed, in
    order, into shards no fuller than the largest. Returns groups of two or more indexes."""
    if not records:
        return []
    full = max(records)
    small = [index for index, count in enumerate(records) if count < full / 2]
    if len(small) < 2 or sum(records[index] for index in small) < full / 2:
        return []
    groups, current, filled = [], [], 0
    for index in small:
        if current and filled + records[index] > full:
            groups.append(current)
            current, filled = [], 0
        current.append(index)
        filled += records[index]
    groups.append(current)
    return [group for group in groups if len(group) > 1]


def shifted_index(index_texts: list[str], sizes: list[int]) -> str:
    """The DALI index of files concatenated in order: each file's "offset size" lines moved by
    the bytes before it."""
    lines, base = [], 0
    for text, size in zip(index_texts, sizes, strict=True):
        for line in text.splitlines():
            offset, length = line.split()
            lines.append(f"{int(offset) + base} {length}\n")
        base += size
    return "".join(lines)
