"""pipeline/runners/local.py: the local runner's shards as tasks for its writer processes."""

from conftest import manifest_row

from tfrecord_pipeline.runners.local import write_tasks
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.grouping import group_by_shard
from tfrecord_pipeline.transforms.plan.sharding import WHOLE, Piece, ShardId
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig

ROWS = 1200  # tiny images in one shard: one core would write them all


def _tasks(plan: DatasetPlan, processes: int):
    rows = [manifest_row(f"cat/{n}") for n in range(ROWS)]
    by_shard = group_by_shard(rows, plan, [].append)
    return write_tasks(by_shard, plan, WriteConfig("staging", processes=processes), processes)


def test_a_shard_over_its_share_of_the_cores_is_written_by_each_core_in_pieces():
    plan = DatasetPlan(LabelMap(("cat",)), (("train", ROWS),), (("train", 1),))
    tasks, writers = _tasks(plan, 2)
    assert [(task.shard, task.piece) for task in tasks] == [
        (ShardId("train", 0, 1), Piece(0, 2)),
        (ShardId("train", 0, 1), Piece(1, 2)),
    ]
    assert writers == 2 and sum(len(task.rows) for task in tasks) == ROWS
    (whole,), writers = _tasks(plan, 1)
    assert (whole.piece, len(whole.rows), writers) == (WHOLE, ROWS, 1)


def test_the_plans_pieces_are_written_as_on_beam():
    """A shard --num_shards makes large is cut in the plan's pieces, whatever the cores."""
    plan = DatasetPlan(LabelMap(("cat",)), (("train", ROWS),), (("train", 2),), (("train", 3),))
    tasks, writers = _tasks(plan, 1)
    assert [(task.shard.index, task.piece) for task in tasks] == [
        (shard, Piece(index, 3)) for shard in range(2) for index in range(3)
    ]
    assert writers == 1
