"""Rows by bucket, held in memory up to a budget and spilled to a local folder beyond it, read
back a bucket at a time: how the local runner keeps its memory flat in the number of rows, as
TFDS's writer spills its examples to buckets. A run of fewer rows than the budget never
touches the disk. The budget is in bytes: rows differ in weight (an archive member's row
carries where its bytes are, twice a loose file's row), so one held row in WEIGH_EVERY is
weighed (`footprint`) and the rows held are as many as the budget holds of rows that heavy.

Each spill of a bucket's rows is a batch, pickled PICKLED_ROWS at a time, appended to a file of
the bucket's in a temporary folder (`$TMPDIR`), a new file every FILE_ROWS rows; pickling gives
the rows back as they were, so the records are the same. A bucket taken is read where it is
iterated: handed to another process (a shard writer), it carries its files' names and the rows
it still held, so its spilled rows are read there, never unpickled and pickled again on their
way through this process. Other processes may spill into the folder too, each batch then
adopted into a bucket here: how the local runner's processes sort the rows it spilled into
shard pieces, a file each, while it sorts those it held.
"""

import contextlib
import math
import os
import pickle
import shutil
import sys
import tempfile
from collections.abc import Hashable, Iterator

from tfrecord_pipeline.transforms.keys import BUCKET_SALT, key_hash

# Rows' bytes held in memory across buckets, about, beyond which the largest bucket spills:
# ~24,000 rows of loose files, ~12,000 of archive members.
HELD_BYTES = 6 << 20
WEIGH_EVERY = 1_000  # one row added in so many is weighed: the others cost no more than a count
# References to an object that is a row's alone: the row's own (two, when a loose file's row's
# key is its image path), and footprint's while it looks (its loop's and sys.getrefcount's).
OWN_REFS = 4
# A bucket's spills go on in one file up to this many rows, then a new one: few files however
# small the spills (many buckets), and the batches large enough to share out between processes.
FILE_ROWS = 10_000
# Rows pickled at once: pickling (and unpickling) holds a note of every object of its rows, as
# much again as the rows, and a spill read back is held a pickle at a time.
PICKLED_ROWS = 1_000
# Rows (or records) a bucket holds, about, where every row of a digest or a key must meet in
# one place (--dedup, --incremental): such a bucket is read back whole and grouped in memory.
GROUPED_ROWS = 10_000

Spilled = tuple[str, int]  # a spilled batch: its file, its rows


class RowBuckets:
    """Rows added to buckets, each taken back once, in the order it was given them.
    `held_rows`: a fixed number of rows to hold, rather than HELD_BYTES' worth. `folder`:
    another process's buckets' folder, to spill into (and never delete); by default one made at
    the first spill and deleted on `close`."""

    def __init__(self, held_rows: int | None = None, folder: str = ""):
        self._limit = sys.maxsize if held_rows is None else held_rows  # until a row is weighed
        self._budget = HELD_BYTES if held_rows is None else 0  # read when made: tests set it
        self._weigh = 1  # rows to add until one is weighed
        self._held: dict[Hashable, list] = {}
        self._holding = 0  # rows in self._held
        self._files: dict[Hashable, list[Spilled]] = {}  # bucket → its spilled batches
        self._counts: dict[Hashable, int] = {}
        self._folder, self._owned = folder, not folder
        self._made: set[str] = set()  # the files this object spilled into, which it may append to

    def add(self, bucket: Hashable, row) -> None:
        held = self._held.setdefault(bucket, [])
        held.append(row)
        self._counts[bucket] = self._counts.get(bucket, 0) + 1
        self._holding += 1
        self._weigh -= 1
        if self._budget and not self._weigh:
            self._weigh = WEIGH_EVERY
            # A row held a while: the reader that made the last may still hold its strings.
            self._limit = max(1, self._budget // footprint(held[len(held) // 2]))
        if self._holding > self._limit:
            self._spill(max(self._held, key=lambda held: len(self._held[held])))

    def adopt(self, bucket: Hashable, batch: Spilled) -> None:
        """Adds to `bucket` a batch another process spilled into `folder()` (`spill_all`)."""
        self._files.setdefault(bucket, []).append(batch)
        self._counts[bucket] = self._counts.get(bucket, 0) + batch[1]

    def count(self, bucket: Hashable) -> int:
        """The rows added to `bucket` and not yet taken."""
        return self._counts.get(bucket, 0)

    def folder(self) -> str:
        """The folder the spilled batches are in, made if need be."""
        if not self._folder:
            self._folder = tempfile.mkdtemp(prefix="tfrecord-pipeline-rows-")
        return self._folder

    def take(self, bucket: Hashable, keep: bool = False) -> "TakenRows":
        """The rows of `bucket`, to be read back a spilled batch at a time (`keep`: as often as
        need be, its files deleted by `release`); the bucket is then empty."""
        held = self._held.pop(bucket, [])
        self._holding -= len(held)
        self._counts.pop(bucket, None)
        return TakenRows((*self._files.pop(bucket, ()), ("", len(held))), held, keep)

    def spill_all(self) -> list[tuple[Hashable, Spilled]]:
        """Every bucket's held rows spilled, each as a batch for the folder's owner to adopt."""
        for bucket in list(self._held):
            self._spill(bucket)
        return [(bucket, batch) for bucket, batches in self._files.items() for batch in batches]

    def _spill(self, bucket: Hashable) -> None:
        rows = self._held.pop(bucket)
        self._holding -= len(rows)
        batches = self._files.setdefault(bucket, [])
        if batches and batches[-1][0] in self._made and batches[-1][1] < FILE_ROWS:
            path, count = batches.pop()
        else:
            descriptor, path = tempfile.mkstemp(dir=self.folder())  # unique across processes
            os.close(descriptor)
            count = 0
            self._made.add(path)
        with open(path, "ab") as handle:
            for start in range(0, len(rows), PICKLED_ROWS):
                pickle.dump(rows[start : start + PICKLED_ROWS], handle, pickle.HIGHEST_PROTOCOL)
        batches.append((path, count + len(rows)))

    def close(self) -> None:
        """Deletes what was spilled into a folder of its own, taken or not."""
        if self._folder and self._owned:
            shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exception) -> None:
        self.close()


def footprint(item) -> int:
    """The bytes `item` holds, about: its own, and those of the objects only it refers to (a
    tuple's or list's, looked into), not of those it shares (a label's string, a manifest's
    path, a small int), which rows beyond number take no more of."""
    size = sys.getsizeof(item)
    if isinstance(item, tuple | list):
        size += sum(footprint(part) for part in item if sys.getrefcount(part) <= OWN_REFS)
    return size


def bucket_count(items: int) -> int:
    """Buckets by hash for `items` rows (or records) to be grouped: GROUPED_ROWS each, about."""
    return max(1, math.ceil(items / GROUPED_ROWS))


def hash_bucket(name: str, buckets: int) -> int:
    """The bucket of a row's key or digest `name`: the same on every run and process."""
    return key_hash(name, BUCKET_SALT) % buckets


class TakenRows:
    """A taken bucket's rows: its spilled batches, each file deleted once read (unless `keep`:
    then by `release`, when no reader is left), then the rows it still held (`batches`: the
    file "", last). Pickled, it holds the files' names and the held rows alone."""

    def __init__(self, batches: tuple[Spilled, ...], held: list, keep: bool = False):
        self._batches, self._held, self._keep = batches, held, keep

    def __len__(self) -> int:
        return sum(rows for _, rows in self._batches)

    def __iter__(self) -> Iterator:
        for path, _ in self._batches:
            if path:
                with open(path, "rb") as handle:
                    while True:
                        try:
                            batch = pickle.load(handle)
                        except EOFError:
                            break
                        yield from batch
                if not self._keep:
                    os.remove(path)
            else:
                yield from self._held

    def spilled(self) -> list["TakenRows"]:
        """Its spilled batches, each as rows of their own, to be read in other processes."""
        return [TakenRows((batch,), []) for batch in self._batches if batch[0]]

    def held(self) -> list:
        """The rows it held in memory."""
        return self._held

    def release(self) -> None:
        """Deletes its spilled files, kept for readers that are done."""
        for path, _ in self._batches:
            if path:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)


def release(rows) -> None:
    """The spilled files of a shard task's rows (a list, TakenRows, or a tuple of them: runs)
    deleted, once no writer reads them."""
    for taken in rows if isinstance(rows, tuple) else (rows,):
        if isinstance(taken, TakenRows):
            taken.release()
