"""transforms/plan/grouping.py: rows grouped by their planned shard, unknown labels as error
rows, and every planned shard listed."""

from conftest import manifest_row

from tfrecord_pipeline.transforms.errors import Reason
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.plan.dataset import (
    DatasetPlan,
)
from tfrecord_pipeline.transforms.plan.grouping import all_shards, group_by_shard
from tfrecord_pipeline.transforms.plan.sharding import (
    ShardId,
    shard_for,
)


def test_rows_group_by_their_shard_and_unknown_labels_are_errors():
    plan = DatasetPlan(LabelMap(("cat",)), (("train", 3), ("test", 1)), (("train", 4), ("test", 1)))
    rows = [manifest_row(f"cat/{i}") for i in range(40)] + [
        manifest_row("cat/t", "test"),
        manifest_row("dog/d"),
    ]
    errors = []
    by_shard = group_by_shard(rows, plan, errors.append)
    assert [(e.key, e.reason) for e in errors] == [("dog/d", Reason.UNKNOWN_LABEL)]
    assert sum(map(len, by_shard.values())) == 41
    assert all(
        shard_for(r.key, r.split, 4 if r.split == "train" else 1) == shard
        for shard, shard_rows in by_shard.items()
        for r in shard_rows
    )
    assert list(all_shards(plan)) == [
        *(ShardId("train", i, 4) for i in range(4)),
        ShardId("test", 0, 1),
    ]
