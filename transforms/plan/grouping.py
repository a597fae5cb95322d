"""Rows to the shards a decided plan gives them: each row's shard from its key's hash (or its
place in its archive: transforms/plan/sharding.py `row_shard`), the
rows whose labels the plan cannot give an id (or whose category has a second name) as error
rows, and every planned shard, so that one no row goes to is still written.

Apart from `dataset.py`, which decides the plan from counts alone: this side runs over the
rows again, where they are (the local runner's list, or each of Beam's batches).
"""

from collections.abc import Callable, Iterable, Iterator

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, RowError, shown
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, error_row, row_labels
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.sharding import ShardId, row_shard


def group_by_shard(
    rows: Iterable[ManifestRow], plan: DatasetPlan, reject: Callable[[ErrorRow], object]
) -> dict[ShardId, list[ManifestRow]]:
    """Rows by the shard they go to (`shards_of`)."""
    by_shard: dict[ShardId, list[ManifestRow]] = {}
    for shard, row in shards_of(rows, plan, reject):
        by_shard.setdefault(shard, []).append(row)
    return by_shard


def shards_of(
    rows: Iterable[ManifestRow], plan: DatasetPlan, reject: Callable[[ErrorRow], object]
) -> Iterator[tuple[ShardId, ManifestRow]]:
    """Each row with the shard it goes to; the rows whose label has no id, or names a label id
    otherwise than the first manifest naming it does, go to `reject` as error rows."""
    shard_counts = dict(plan.shards)
    names = dict(plan.label_names)
    for row in rows:
        try:
            for label in row_labels(row):
                plan.labels.id_of(label)
            if row.objects and names:
                check_names(row, names)
        except RowError as error:
            reject(error_row(row, error.reason, error.message))
            continue
        yield row_shard(row, shard_counts[row.split]), row


def check_names(row: ManifestRow, names: dict[str, tuple[int, str]]) -> None:
    """Raise a bad_annotation RowError when the row names one of its objects' label ids
    otherwise than the first manifest that names it (two COCO files, one category id)."""
    for obj in row.objects:
        if obj.text and (first := names.get(obj.label)) and first[1] != obj.text:
            raise RowError(
                Reason.BAD_ANNOTATION,
                f"category {obj.label} is {shown(obj.text)} here, {shown(first[1])} in manifest "
                f"{first[0] + 1} of --manifest: one id, one name",
            )


def all_shards(plan: DatasetPlan) -> Iterator[ShardId]:
    """Every planned shard, so that one that gets no rows is still written (empty)."""
    for split, count in plan.shards:
        for index in range(count):
            yield ShardId(split, index, count)
