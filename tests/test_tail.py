"""transforms/local/tail.py: the end of a local run shared out. Claims in the memory processes
share, here used from one process as a writer and the pool would; the shards a split writes
are the shard's bytes (tests/test_local_pool.py)."""

import itertools
import multiprocessing
import os
import signal

import pytest
from conftest import manifest_row

from tfrecord_pipeline.transforms.local.tail import (
    CLAIM_ITEMS,
    MIN_SPLIT_ITEMS,
    RETRY_S,
    Claims,
    Share,
    claimed,
    numbered,
    share_end,
)
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.plan.sharding import WHOLE, Piece, ShardId
from tfrecord_pipeline.transforms.write.formats import ShardFormat
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult, WriteConfig
from tfrecord_pipeline.transforms.write.tasks import ShardTask

ITEMS = 4 * MIN_SPLIT_ITEMS


@pytest.fixture
def claims() -> Claims:
    """Two workers' claims; this process plays the first worker."""
    made = Claims(multiprocessing.get_context("spawn"), 2)
    made.at(0)
    return made


def _task(rows: int, number: int = -1, **config) -> ShardTask:
    listed = [manifest_row(f"cat/{index}.jpg") for index in range(rows)]
    write = WriteConfig("staging", **config)
    return ShardTask(ShardId("train", 0, 1), listed, LabelMap(("cat",)), write, 1, number=number)


def test_a_writer_stops_where_a_split_sets_and_the_rest_is_left_whole(claims):
    assert claims.begin(7)
    writing = claimed(range(ITEMS), claims)
    written = list(itertools.islice(writing, 100))
    number, first = claims.split({7: ITEMS})
    written += writing
    assert number == 7 and written == list(range(first))
    rest = Share(_task(ITEMS)._replace(first=first), claims).portion(iter(range(ITEMS)))
    assert written + list(rest) == list(range(ITEMS))
    assert claims.end() == first


def test_a_split_lands_past_every_item_the_writer_took_half_way_through_the_rest(claims):
    """The writer took a batch of items ahead of the one it writes: none of them is the
    second writer's."""
    claims.begin(7)
    writing = claimed(range(ITEMS), claims)
    next(writing)
    _, first = claims.split({7: ITEMS})
    assert first == CLAIM_ITEMS + (ITEMS - CLAIM_ITEMS) // 2
    assert len([0, *writing]) == first


def test_a_task_is_split_once_only_while_its_writer_writes_it_and_has_enough_left(claims):
    assert claims.split({7: ITEMS}) is None  # not begun
    claims.begin(7)
    assert claims.split({8: ITEMS}) is None  # another task
    writing = claimed(range(ITEMS), claims)
    list(itertools.islice(writing, ITEMS - 2 * MIN_SPLIT_ITEMS + 1))
    assert claims.split({7: ITEMS}) is None  # too few left
    claims.begin(7)
    assert claims.split({7: ITEMS}) is not None
    assert claims.split({7: ITEMS}) is None  # split already
    claims.end()
    assert claims.split({7: ITEMS}) is None  # written


def test_a_worker_without_a_slot_writes_its_tasks_whole():
    claims = Claims(multiprocessing.get_context("spawn"), 1)
    claims.at(1)
    assert not claims.begin(7)
    share = Share(_task(ITEMS, number=7), claims)
    assert list(share.portion(iter(range(5)))) == list(range(5))


def test_only_whole_shards_of_enough_rows_in_files_that_join_are_numbered():
    assert numbered(_task(ITEMS), 3).number == 3
    assert numbered(_task(2 * MIN_SPLIT_ITEMS - 1), 3).number == -1
    assert numbered(_task(ITEMS)._replace(piece=Piece(0, 2)), 3).number == -1
    gzip = _task(ITEMS, shard_format=ShardFormat(compression="gzip"))
    array_record = _task(ITEMS, shard_format=ShardFormat(file_format="array_record"))
    assert numbered(gzip, 3).number == numbered(array_record, 3).number == -1
    runs = _task(ITEMS)._replace(rows=(["row"] * ITEMS, ["row"] * ITEMS))
    assert numbered(runs, 3).number == 3


def test_a_free_writer_gets_the_second_half_of_the_largest_task_left(claims):
    small, large = _task(ITEMS, number=1), _task(2 * ITEMS, number=2)
    claims.begin(2)
    running = {"small's": small, "large's": large}
    assert share_end(claims, running, 2) == ([], None)  # every writer busy
    del running["small's"]
    (share,), patience = share_end(claims, running, 2)
    assert patience is None
    assert share.piece == Piece(1, 2) and share.first == ITEMS and share.number == -1
    assert running["large's"].number == -1  # split once
    assert share_end(claims, running, 2) == ([], None)


def test_a_free_writer_asks_again_soon_while_the_task_left_has_not_begun(claims):
    running = {"large's": _task(2 * ITEMS, number=2)}
    assert share_end(claims, running, 2) == ([], RETRY_S)


def test_a_split_tasks_result_is_its_shards_first_piece(claims):
    share = Share(_task(ITEMS, number=7), claims)
    result = ShardResult("train", 0, 1, "train-00000-of-00001.tfrecord", 10, 100, "crc", ())
    assert share.pieces(["error row", result]) == ["error row", result]
    share = Share(_task(ITEMS, number=7), claims)
    claims.split({7: ITEMS})
    pieces = share.pieces(["error row", result])
    assert pieces == ["error row", result._replace(piece=Piece(0, 2))]
    assert result.piece == WHOLE


def _hold_and_die(claims: Claims) -> None:
    claims._lock.acquire()
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.timeout(30)
def test_a_split_gives_up_on_the_lock_of_a_worker_killed_holding_it(claims):
    """The pool then sees the worker's death and reports it; a split waiting on the lock would
    have kept the run waiting for ever."""
    claims.begin(7)
    context = multiprocessing.get_context("spawn")
    worker = context.Process(target=_hold_and_die, args=(claims,))
    worker.start()
    worker.join()
    assert worker.exitcode == -signal.SIGKILL
    assert claims.split({7: ITEMS}) is None
