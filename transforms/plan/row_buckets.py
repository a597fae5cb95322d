"""Rows by bucket, held in memory up to a budget and spilled to a local folder beyond it, read
back a bucket at a time: how the local runner keeps its memory flat in the number of rows, as
TFDS's writer spills its examples to buckets. A run of fewer rows than the budget never
touches the disk.

A bucket's spilled rows are pickled batches appended to a file of its own in a temporary
folder (`$TMPDIR`); pickling gives the rows back as they were, so the records are the same.
"""

import itertools
import os
import pickle
import shutil
import tempfile
from collections.abc import Hashable, Iterator

HELD_ROWS = 25_000  # rows held in memory across buckets (~10 MB), beyond which the largest spills


class RowBuckets:
    """Rows added to buckets, each taken back once, in the order it was given them."""

    def __init__(self, held_rows: int = HELD_ROWS):
        self._limit = held_rows
        self._held: dict[Hashable, list] = {}
        self._holding = 0  # rows in self._held
        self._files: dict[Hashable, str] = {}  # bucket → its spilled batches
        self._counts: dict[Hashable, int] = {}
        self._folder = ""  # made at the first spill
        self._names = itertools.count()

    def add(self, bucket: Hashable, row) -> None:
        self._held.setdefault(bucket, []).append(row)
        self._counts[bucket] = self._counts.get(bucket, 0) + 1
        self._holding += 1
        if self._holding > self._limit:
            self._spill(max(self._held, key=lambda held: len(self._held[held])))

    def count(self, bucket: Hashable) -> int:
        """The rows added to `bucket` and not yet taken."""
        return self._counts.get(bucket, 0)

    def take(self, bucket: Hashable) -> Iterator:
        """The rows of `bucket`, read back a spilled batch at a time; the bucket is then empty."""
        held = self._held.pop(bucket, [])
        self._holding -= len(held)
        self._counts.pop(bucket, None)
        return _read(self._files.pop(bucket, ""), held)

    def _spill(self, bucket: Hashable) -> None:
        rows = self._held.pop(bucket)
        self._holding -= len(rows)
        if not self._folder:
            self._folder = tempfile.mkdtemp(prefix="tfrecord-pipeline-rows-")
        if bucket not in self._files:  # a name never given before: a taken file may be open
            self._files[bucket] = os.path.join(self._folder, str(next(self._names)))
        path = self._files[bucket]
        with open(path, "ab") as handle:
            pickle.dump(rows, handle, pickle.HIGHEST_PROTOCOL)

    def close(self) -> None:
        """Deletes what was spilled, taken or not."""
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exception) -> None:
        self.close()


def _read(path: str, held: list) -> Iterator:
    """A bucket's spilled batches (deleted once read), then the rows it still held."""
    if path:
        with open(path, "rb") as handle:
            while True:
                try:
                    batch = pickle.load(handle)
                except EOFError:
                    break
                yield from batch
        os.remove(path)
    yield from held
