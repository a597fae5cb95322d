"""The dataset plan: label ids, and how many shards each split gets.

Made from one pass over the manifest rows (rows only; image bytes never leave their shard writer).
With `--target_shard_mb`, a split's size is estimated from a fixed sample of its rows: the
`SAMPLE_SIZE` rows with the smallest shard hash, so the estimate, and the shard count, are the
same on every run.
"""

import functools
import heapq
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

from tfrecord_pipeline.transforms.image.files import stored_size
from tfrecord_pipeline.transforms.keys import SHARD_SALT, key_hash
from tfrecord_pipeline.transforms.manifest.labels import (
    MAX_LABELS,
    LabelMap,
    check_label_count,
    check_vocabulary,
    inherited_label_map,
    label_map_from_labels,
)
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, manifest_number, row_labels
from tfrecord_pipeline.transforms.plan.carried import ArchiveLine, with_carried
from tfrecord_pipeline.transforms.plan.sharding import ShardCounts, pieces_for, shards_for_bytes

SAMPLE_SIZE = 64


class PlanStats(NamedTuple):
    """What the planner needs to know of the rows: labels, per split a count, and a sample of
    each split whose shard count comes from its size."""

    labels: frozenset
    rows: tuple[tuple[str, int], ...]  # (split, row count)
    # (split, ((shard hash, image uri, its size if the row knows it, else -1), ...))
    samples: tuple[tuple[str, tuple], ...]
    # A named label id's name (a COCO category's) as the first manifest naming it gives it:
    # (label, (manifest number, name)), sorted.
    label_names: tuple[tuple[str, tuple[int, str]], ...] = ()
    labels_given: int = 0  # labels the rows give, repeats counted: a row's one, or several
    archives: tuple[tuple[str, str, int], ...] = ()  # (archive, split, its members' rows), sorted


class PlanAccumulator:
    """Mergeable accumulation of `PlanStats` (the state of a Beam CombineFn). Only the splits
    whose shard count `counts` leaves to their size are sampled, unless `sample_every_split`
    (Beam, which writes large shards in pieces): a row's shard hash costs more than the rest
    of its accounting. Over `max_labels` labels is a UserError when seen: none held beyond."""

    def __init__(
        self,
        counts: ShardCounts | None = None,
        sample_every_split: bool = False,
        max_labels: int | None = None,
    ):
        self.labels: set[str] = set()
        self.max_labels = max_labels or MAX_LABELS  # `--max_labels`
        self.label_names: dict[str, tuple[int, str]] = {}
        self.rows: dict[str, int] = {}
        self.labels_given = 0
        self.archives: Counter = Counter()  # (archive, split) → rows of its members
        self.samples: dict[str, list] = {}  # split → heap of (-shard hash, image uri, size)
        self._counts = counts or ShardCounts()
        self._sample_every_split = sample_every_split
        self._sized: dict[str, bool] = {}  # split → whether its rows are sampled

    def add(self, row: ManifestRow) -> "PlanAccumulator":
        labels = row_labels(row)
        self.labels.update(labels)
        self.labels_given += len(labels)
        check_label_count(self.labels, self.max_labels)
        if row.objects:
            number = manifest_number(row)
            for obj in row.objects:
                if obj.text:
                    self._name(obj.label, (number, obj.text))
        self.rows[row.split] = self.rows.get(row.split, 0) + 1
        if row.member is not None:
            self.archives[row.source_path, row.split] += 1
        if self._is_sized(row.split):
            size = row.member.size if row.member else -1  # an archive member's is listed
            self._offer(row.split, (-key_hash(row.key, SHARD_SALT), row.image_uri, size))
        return self

    def _is_sized(self, split: str) -> bool:
        sized = self._sized.get(split)
        if sized is None:
            sized = self._sample_every_split or self._counts.for_split(split) is None
            self._sized[split] = sized
        return sized

    def _name(self, label: str, named: tuple[int, str]) -> None:
        """Keep the name of the first manifest (then the smallest name) for a label id, so
        where rows are counted does not change which name wins."""
        known = self.label_names.get(label)
        if known is None or named < known:
            self.label_names[label] = named

    def merge(self, other: "PlanAccumulator") -> "PlanAccumulator":
        self.labels |= other.labels
        self.labels_given += other.labels_given
        check_label_count(self.labels, self.max_labels)
        for label, named in other.label_names.items():
            self._name(label, named)
        for split, count in other.rows.items():
            self.rows[split] = self.rows.get(split, 0) + count
        self.archives.update(other.archives)
        for split, heap in other.samples.items():
            for entry in heap:
                self._offer(split, entry)
        return self

    def _offer(self, split: str, entry: tuple[int, str, int]) -> None:
        """Keep the SAMPLE_SIZE smallest hashes: a max-heap of negated hashes, O(log k) a row."""
        heap = self.samples.setdefault(split, [])
        if len(heap) < SAMPLE_SIZE:
            heapq.heappush(heap, entry)
        elif entry > heap[0]:
            heapq.heapreplace(heap, entry)

    def stats(self) -> PlanStats:
        samples = (
            (split, tuple(sorted((-negated, uri, size) for negated, uri, size in heap)))
            for split, heap in self.samples.items()
        )
        return PlanStats(
            frozenset(self.labels),
            tuple(sorted(self.rows.items())),
            tuple(sorted(samples)),
            tuple(sorted(self.label_names.items())),
            self.labels_given,
            tuple(sorted((path, split, n) for (path, split), n in self.archives.items())),
        )


class DatasetPlan(NamedTuple):
    labels: LabelMap
    rows: tuple[tuple[str, int], ...]  # (split, manifest rows)
    shards: tuple[tuple[str, int], ...]  # (split, shard count)
    pieces: tuple[tuple[str, int], ...] = ()  # (split, pieces a shard is written in), if over 1
    detection: bool = False  # records hold objects (boxes), not one label
    label_names: tuple[tuple[str, tuple[int, str]], ...] = ()  # PlanStats.label_names
    archives: tuple[tuple[str, str, int], ...] = ()  # PlanStats.archives

    def pieces_of(self, split: str) -> int:
        return dict(self.pieces).get(split, 1)

    @property
    def row_count(self) -> int:
        """The manifest rows of every split: what a run counts to."""
        return sum(rows for _, rows in self.rows)


class LabelSource(NamedTuple):
    """Where label ids come from: `--label_map` (pinned), else the published version's ids
    (inherited, extended with new labels unless frozen), else the names the manifests declare
    in id order (a Hugging Face ClassLabel's; other labels seen after them), else the labels
    seen (first version)."""

    pinned: LabelMap | None = None
    offset: int = 0
    inherited: LabelMap | None = None
    frozen: bool = False
    declared: tuple[str, ...] = ()

    def label_map(self, labels: frozenset) -> LabelMap:
        if self.pinned:
            return self.pinned
        if self.inherited:
            return inherited_label_map(self.inherited, labels, self.frozen)
        if self.declared:
            return inherited_label_map(LabelMap(self.declared, self.offset), labels, False)
        return label_map_from_labels(labels, self.offset)


class PlanConfig(NamedTuple):
    """What the planner takes besides the rows' stats: built once from the options."""

    labels: LabelSource
    counts: ShardCounts
    target_shard_mb: float
    max_file_bytes: int  # a larger file weighs nothing in a split's size: it is an error row
    detection: bool = False  # records hold objects (boxes), not one label
    max_labels: int | None = None  # `--max_labels`; None: MAX_LABELS, and labels not one a row
    carried: tuple[ArchiveLine, ...] = ()  # archives a refresh carries unread, their rows counted
    # The fewest records a shard sized by bytes should hold, where its split has as many:
    # --write_index's 2 (the PyTorch tfrecord package's index reader fails on fewer); 0: any.
    least_records: int = 0


def make_plan(stats: PlanStats, config: PlanConfig, size_of: Callable[[str], int]) -> DatasetPlan:
    """Label ids, shard counts, and the pieces of shards that `--num_shards` makes larger than
    `config.target_shard_mb`; `size_of` is only called for sampled rows. Labels nearly one a
    row are a UserError (`check_vocabulary`), but objects' categories, which a COCO file
    declares: a class of a few objects there is the dataset's own (LVIS has hundreds)."""
    stats = with_carried(stats, config.carried)
    if not config.detection:
        check_vocabulary(len(stats.labels), stats.labels_given, config.max_labels)
    labels = config.labels.label_map(stats.labels)
    check_label_count(labels.names, config.max_labels or MAX_LABELS)  # with those inherited
    samples = dict(stats.samples)
    shards, pieces = [], []
    for split, rows in stats.rows:
        count = config.counts.for_split(split)
        estimate = None
        if split in samples:
            sizes = [
                size if size >= 0 else _size_or_zero(size_of, uri)
                for _, uri, size in samples[split]
            ]
            estimate = rows * sum(sizes) / max(1, len(sizes))
        if count is None:
            count = shards_for_bytes(estimate, config.target_shard_mb, rows, config.least_records)
        shards.append((split, count))
        if (
            estimate is not None
            and (split_pieces := pieces_for(estimate / count, config.target_shard_mb)) > 1
        ):
            pieces.append((split, split_pieces))
    return DatasetPlan(
        labels,
        stats.rows,
        tuple(shards),
        tuple(pieces),
        label_names=stats.label_names,
        detection=config.detection,
        archives=stats.archives,
    )


def _size_or_zero(size_of: Callable[[str], int], uri: str) -> int:
    """A missing file in the sample still becomes an error row later; here it weighs nothing."""
    try:
        return size_of(uri)
    except (OSError, IndexError, ValueError):
        return 0


def decide_plan(stats: PlanStats, config: PlanConfig) -> DatasetPlan:
    """`make_plan` once every row is counted, a sampled row weighing its file's size (a stat,
    never a read)."""
    return make_plan(
        stats, config, functools.partial(stored_size, max_file_bytes=config.max_file_bytes)
    )
