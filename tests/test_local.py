"""transforms/local/shards.py: the local runner's rows in buckets by shard piece, and its
shards' (or pieces') tasks for its writer processes."""

import itertools
import pickle
import tempfile
import tracemalloc

import pytest
from conftest import manifest_row

from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.local import row_buckets
from tfrecord_pipeline.transforms.local.pool import ShardPool
from tfrecord_pipeline.transforms.local.row_buckets import RowBuckets
from tfrecord_pipeline.transforms.local.shards import (
    Cut,
    bucket_rows,
    shard_tasks,
    sort_batch,
    sort_rows,
    split_pieces,
)
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.plan import sharding
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.sharding import WHOLE, Piece, ShardId, piece_of
from tfrecord_pipeline.transforms.write.formats import ShardFormat
from tfrecord_pipeline.transforms.write.shard_writer import SortedRuns, WriteConfig

ROWS = 1200  # tiny images in one shard: one core would write them all
TFRECORD = ShardFormat()


def _tasks(plan: DatasetPlan, processes: int, held_rows: int = 100, shard_format=TFRECORD):
    rows = [manifest_row(f"cat/{n}") for n in range(ROWS)] + [manifest_row("dog/0")]
    config = WriteConfig("staging", shard_format=shard_format, processes=processes)
    pieces = split_pieces(plan, dict(plan.rows), processes, config)
    errors = []
    with RowBuckets(held_rows) as buckets:
        sample = bucket_rows(rows, plan, pieces, errors.append, buckets)
        tasks, writers = shard_tasks(buckets, plan, pieces, config, sample)
        # Read while the buckets' spilled files are there, as a writer does.
        tasks = [task._replace(rows=_read(task.rows)) for task in tasks]
    assert [error.key for error in errors] == ["dog/0"]  # no id for its label
    assert sorted(row.key for task in tasks for row in _rows_of(task)) == sorted(
        row.key for row in rows[:-1]
    )
    return tasks, writers


def _read(rows):
    return SortedRuns(list(run) for run in rows) if isinstance(rows, SortedRuns) else list(rows)


def _rows_of(task):
    return (
        [row for run in task.rows for row in run]
        if isinstance(task.rows, SortedRuns)
        else task.rows
    )


@pytest.mark.parametrize(
    "unjoinable", [ShardFormat("tfrecord", "gzip"), ShardFormat("array_record", "none")]
)
def test_a_shard_over_its_share_of_the_cores_is_written_by_each_core_in_pieces(unjoinable):
    plan = DatasetPlan(LabelMap(("cat",)), (("train", ROWS),), (("train", 1),))
    tasks, writers = _tasks(plan, 2)
    assert [(task.shard, task.piece) for task in tasks] == [
        (ShardId("train", 0, 1), Piece(0, 2)),
        (ShardId("train", 0, 1), Piece(1, 2)),
    ] or [(task.shard, task.piece) for task in tasks] == [
        (ShardId("train", 0, 1), Piece(1, 2)),
        (ShardId("train", 0, 1), Piece(0, 2)),
    ]
    assert [task.piece.index for task in tasks] == [0, 1]  # in order: each joins as it ends
    assert all(piece_of(row.key, 2) == task.piece.index for task in tasks for row in task.rows)
    assert writers == 2
    (whole,), writers = _tasks(plan, 1)
    assert (whole.piece, len(whole.rows), writers) == (WHOLE, ROWS, 1)
    # Joining gzip or ArrayRecord pieces writes every record again: shards stay whole.
    (whole,), writers = _tasks(plan, 2, shard_format=unjoinable)
    assert (whole.piece, len(whole.rows), writers) == (WHOLE, ROWS, 1)


def test_a_shard_of_more_rows_than_a_writer_holds_is_written_whole_in_runs(monkeypatch):
    """Not in pieces to join, as Beam writes a shard --num_shards makes large (the plan's
    pieces): a join copies every byte again. Each run is a range of the record order, as
    Beam's pieces are, so the shard's bytes are the same."""
    monkeypatch.setattr(sharding, "MAX_RUN_ROWS", 250)
    plan = DatasetPlan(LabelMap(("cat",)), (("train", ROWS),), (("train", 2),), (("train", 3),))
    tasks, writers = _tasks(plan, 1)
    assert sorted((task.shard.index, task.piece) for task in tasks) == [(0, WHOLE), (1, WHOLE)]
    assert writers == 1
    for task in tasks:
        assert isinstance(task.rows, SortedRuns) and len(task.rows) == 3  # 600 rows a shard
        for index, run in enumerate(task.rows):
            assert 150 < len(run) < 250 and {piece_of(row.key, 3) for row in run} == {index}


def test_rows_beyond_the_budget_are_spilled_and_read_back_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # $TMPDIR, as read once
    rows = [manifest_row(f"cat/{n}") for n in range(250)]
    with RowBuckets(held_rows=40) as buckets:
        for row in rows:
            buckets.add(row.key[-1], row)
        spilled = list(tmp_path.glob("tfrecord-pipeline-rows-*/*"))
        assert spilled and buckets.count("7") == 25
        assert list(buckets.take("7")) == [row for row in rows if row.key.endswith("7")]
        assert buckets.count("7") == 0 and list(buckets.take("7")) == []
    assert not list(tmp_path.iterdir())  # nothing left behind


def test_a_taken_bucket_carries_its_spilled_rows_file_to_a_writer_process_not_its_rows():
    rows = [manifest_row(f"cat/{n}") for n in range(2000)]
    with RowBuckets(held_rows=100) as buckets:
        for row in rows:
            buckets.add("piece", row)
        taken = buckets.take("piece")
        sent = pickle.dumps(taken, pickle.HIGHEST_PROTOCOL)
        assert len(taken) == len(rows) and len(sent) < len(pickle.dumps(rows[:200]))
        assert list(pickle.loads(sent)) == rows


def test_rows_taken_from_one_bucket_can_be_spilled_into_others():
    """As the runner sorts the rows it read into shard pieces: the new buckets' spills never
    write into the file being read."""
    rows = [manifest_row(f"cat/{n}") for n in range(50)]
    with RowBuckets(held_rows=10) as buckets:
        for row in rows:
            buckets.add("read", row)
        for row in itertools.islice(buckets.take("read"), len(rows) + 1):
            buckets.add(row.key[-1], row)
        again = [row for digit in "0123456789" for row in buckets.take(digit)]
    assert sorted(again) == sorted(rows)


def test_the_pools_processes_sort_the_spilled_rows_into_the_pieces_this_process_would():
    plan = DatasetPlan(LabelMap(("cat",)), (("train", ROWS),), (("train", 2),))
    rows = [manifest_row(f"cat/{n}") for n in range(ROWS)] + [manifest_row("dog/0")]
    pieces = {"train": Cut(3)}
    parts = [(ShardId("train", i, 2), j) for i in (0, 1) for j in (0, 1, 2)]

    def sorted_on(pool):
        errors = []
        with RowBuckets(held_rows=100) as buckets:
            for row in rows:
                buckets.add("read", row)
            sample = sort_rows(buckets.take("read"), plan, pieces, errors.append, buckets, pool)
            by_part = [sorted(row.key for row in buckets.take(part)) for part in parts]
        return [error.key for error in errors], by_part, len(sample)

    with ShardPool(2, ImageConfig()) as pool:
        on_the_pool = sorted_on(pool)
    assert on_the_pool == sorted_on(None)
    assert on_the_pool[0] == ["dog/0"] and sum(map(len, on_the_pool[1])) == ROWS


def test_a_process_sorting_a_spilled_batch_into_pieces_holds_the_budget_not_the_batch(
    tmp_path, monkeypatch
):
    """It held every row of the batch (an archive's: 25,000 rows, ~15 MB) until the end."""
    monkeypatch.setattr(row_buckets, "HELD_BYTES", 256 << 10)
    plan = DatasetPlan(LabelMap(("cat",)), (("train", 20_000),), (("train", 2),))
    rows = [manifest_row(f"cat/{n}") for n in range(20_001)]
    with RowBuckets(held_rows=20_000) as buckets:
        for row in rows:
            buckets.add("read", row)
        (batch,) = buckets.take("read").spilled()
        tracemalloc.start()
        try:
            spilled, _, _ = sort_batch(batch, plan, {"train": Cut(3)}, str(tmp_path))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        sorted_rows = RowBuckets(folder=str(tmp_path))
        for bucket, part in spilled:
            sorted_rows.adopt(bucket, part)
        parts = {bucket for bucket, _ in spilled}
        assert sum(len(list(sorted_rows.take(part))) for part in parts) == len(rows)
    assert peak < 2 << 20  # the batch's 20,000 rows: ~5 MB
