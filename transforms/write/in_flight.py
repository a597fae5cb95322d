"""Images in flight on a shard writer's threads: how many it holds at once, and a map over its
pool that keeps them in order, which is what makes a shard's bytes the same however many
threads wrote it."""

from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor

IN_FLIGHT_PER_THREAD = 8  # images a writer holds a thread while its threads are few
QUEUED_IMAGES = 64  # and beyond one a thread, at most, however many threads: images_in_flight


def images_in_flight(threads: int) -> int:
    """Images a writer on `threads` threads holds at most (being read or converted, or waiting
    to be written): one a thread, and a queue that lets threads go on while the next image to be
    written is slow: 7 a thread while they are few, never over QUEUED_IMAGES, so memory grows by
    one image a thread (8 a thread would be 1,600 images at 200 threads)."""
    return threads + min((IN_FLIGHT_PER_THREAD - 1) * threads, QUEUED_IMAGES)


def ordered_map(pool: Executor | None, function, items: Iterable, window: int) -> Iterator:
    """`map` over a thread pool with at most `window` results in flight, in input order.

    The order makes the shard deterministic; the window bounds memory to a few images
    however long the shard is.
    """
    if pool is None:
        yield from map(function, items)
        return
    pending: deque = deque()
    for item in items:
        pending.append(pool.submit(function, item))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()
