"""The end of a local run shared out: a shard writer left without a task takes over the second
half of what another has left of its shard, so that no core waits for another's last shard.

The local runner's writers take its tasks (whole shards, transforms/local/shards.py) as they
get free. On cores of unequal speed (a laptop's performance and efficiency cores; a virtual
machine's core shared with a neighbour) the writers drift apart, and the last task ends up to
a whole shard's time after the others, while their cores wait. So once every task is taken,
a writer that ends its task splits the largest one still being written: that one's writer
stops half way through what it has left, and the free one writes the rest. The two files are
the shard's two pieces (`Piece(0, 2)`, `Piece(1, 2)`), joined as any shard's pieces are
(transforms/write/shard_pieces.py): the bytes of the shard written whole, of which only the
second piece's are copied.

A writer takes its items (rows and duplicate-key error rows, in record order) CLAIM_ITEMS at a
time from memory the processes share (`Claims`), and a split is set under the same lock past
every item it took: no item is written by both writers, or by neither.
"""

import ctypes
import itertools
from collections.abc import Iterable, Iterator

from tfrecord_pipeline.transforms.plan.sharding import Piece
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult
from tfrecord_pipeline.transforms.write.tasks import ShardTask

CLAIM_ITEMS = 32  # items a writer takes at once: one lock a few milliseconds of its work
# The least of a shard a second writer takes on: fewer are over before its start (reading and
# sorting the shard's rows again) and the join that copies them are repaid.
MIN_SPLIT_ITEMS = 256
RETRY_S = 0.05  # how soon a free writer asks again when the task to split has not begun
_NONE = -1  # a slot's task when its writer writes none that may be split
_WHOLE = 2**62  # a slot's stop when its task was not split


class Claims:
    """Each pool worker's splittable task in memory the processes share: the task's number, the
    items of it its writer has taken, and where a split stops it. Made in the pool's process
    before its workers start, each of which then uses the slot `at(slot)` gives it."""

    def __init__(self, context, workers: int):
        self._lock = context.Lock()
        self._tasks = context.Array(ctypes.c_longlong, [_NONE] * workers, lock=False)
        self._taken = context.Array(ctypes.c_longlong, workers, lock=False)
        self._stops = context.Array(ctypes.c_longlong, [_WHOLE] * workers, lock=False)
        self._slot = -1  # a worker's own, once given

    def at(self, slot: int) -> None:
        """In a worker: its slot, from 0 (-1: one more worker than slots, which splits nothing)."""
        self._slot = slot if 0 <= slot < len(self._tasks) else -1

    def begin(self, task: int) -> bool:
        """In a worker, before it writes task number `task`: whether its items are claimed."""
        if self._slot < 0:
            return False
        with self._lock:
            self._tasks[self._slot], self._taken[self._slot] = task, 0
            self._stops[self._slot] = _WHOLE
        return True

    def take(self, at: int) -> int:
        """In a worker at item `at` of its task: the item up to which it may now write; `at`
        when a split stops it there."""
        with self._lock:
            until = min(at + CLAIM_ITEMS, self._stops[self._slot])
            self._taken[self._slot] = max(until, at)
            return until

    def end(self) -> int | None:
        """In a worker, its task written: the item it was stopped at, if the task was split."""
        with self._lock:
            self._tasks[self._slot] = _NONE
            stop = self._stops[self._slot]
        return None if stop == _WHOLE else stop

    def split(self, items: dict[int, int]) -> tuple[int, int] | None:
        """In the pool's process: of the tasks of `items` (task number → its items) being
        written, the one with most items left is split half way through them. Its number and
        the item the rest starts at; None when none has 2 * MIN_SPLIT_ITEMS left (or has begun,
        or was split already), or when the lock is not free within RETRY_S: a worker killed
        while it held it never frees it, and the pool reports the death."""
        if not self._lock.acquire(timeout=RETRY_S):
            return None
        try:
            left = {
                slot: (items[task] - self._taken[slot], task)
                for slot, task in enumerate(self._tasks)
                if task in items and self._stops[slot] == _WHOLE
            }
            if not left:
                return None
            slot = max(left, key=left.get)
            remaining, task = left[slot]
            if remaining < 2 * MIN_SPLIT_ITEMS:
                return None
            self._stops[slot] = stop = self._taken[slot] + remaining // 2
        finally:
            self._lock.release()
        return task, stop


def claimed(items: Iterable, claims: Claims) -> Iterator:
    """`items` as far as a writer may write them: taken from `claims` a few at a time, up to
    the item a split stops it at."""
    until = 0
    for at, item in enumerate(items):
        if at >= until:
            until = claims.take(at)
            if at >= until:
                return
        yield item


def items_of(task: ShardTask) -> int:
    """Its rows, and so its items: one each, a row or its duplicate-key error row."""
    rows = task.rows
    return sum(map(len, rows)) if isinstance(rows, tuple) else len(rows)  # a tuple: runs


def numbered(task: ShardTask, number: int) -> ShardTask:
    """`task`, the pool's `number`th, numbered when it may be split: a whole shard, of enough
    rows, in files that join end to end (which a second piece of gzip or ArrayRecord is not)."""
    whole = task.piece.count == 1 and task.config.shard_format.concatenates
    return task._replace(number=number) if whole and items_of(task) >= 2 * MIN_SPLIT_ITEMS else task


def share_end(
    claims: Claims, running: dict, processes: int
) -> tuple[list[ShardTask], float | None]:
    """Once every task is taken, with fewer `running` (future → its task) than `processes`:
    tasks for the free writers, each the second piece of the largest task left (which is then
    no longer numbered, as its second piece never is: a shard is split once); and how long to
    wait for a task to end before asking again (None: until one does)."""
    items = {task.number: items_of(task) for task in running.values() if task.number >= 0}
    shares: list[ShardTask] = []
    while len(running) + len(shares) < processes and items:
        split = claims.split(items)
        if split is None:
            return shares, RETRY_S
        number, first = split
        del items[number]
        future = next(future for future, task in running.items() if task.number == number)
        running[future] = task = running[future]._replace(number=_NONE)
        shares.append(task._replace(piece=Piece(1, 2), first=first))
    return shares, None


class Share:
    """A worker's share of its task: the items of it it writes (write_shard's `portion`), and
    its results as they then are."""

    def __init__(self, task: ShardTask, claims: Claims):
        self._first = task.first
        self._claims = claims if task.number >= 0 and claims.begin(task.number) else None

    def portion(self, items: Iterator) -> Iterator:
        if self._claims:
            return claimed(items, self._claims)
        return itertools.islice(items, self._first, None) if self._first else items

    def pieces(self, results: list) -> list:
        """`results`, once written: the shard's the first of two pieces if its task was split."""
        if self._claims is None or self._claims.end() is None:
            return results
        first = Piece(0, 2)
        return [
            item._replace(piece=first) if type(item) is ShardResult else item for item in results
        ]
