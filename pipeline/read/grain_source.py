"""Random access to a converted dataset's records, for Grain: record `i` of a split read by
its offset from the version's index files (`--write_index`), so that Grain shuffles it
globally without converting it again; or, of a version of ArrayRecord shards, which hold
their own index, by array_record's own data source.

Grain shuffles globally only a source that can read record `i` (its RandomAccessDataSource
protocol: `__len__` and `__getitem__`, and a `__repr__` for its checkpoints). A TFRecord file
can only be walked from its start, but the DALI index written beside each shard
(`index/<shard>.idx`, `offset size` a record) says where every record starts. A record is one
read (`os.pread` of a local shard; one ranged request of a `gs://` object), its length and data
CRCs checked. Grain's own classes are not needed here: the protocol is a shape, not a base
class, so nothing here imports Grain.

What a source holds: the split's shards from the version's metadata (name, index name,
records, bytes) and, for each shard it has read from, where its records start, loaded from
the shard's index on first use: 4 bytes a record (8 in a shard of 4 GiB or more), so a
process reading all of a split of a million records holds about 4 MB, no record after it is
returned, and no read buffer. Grain's worker processes get it pickled: the version's folder
and the shards, no offsets and no open file; each process loads and opens its own. Its reads
may come from many threads at once: positional reads share no file position, and an index is
loaded once a process, under its shard's lock.
"""

import array
import bisect
import itertools
import operator
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import NamedTuple, SupportsIndex

from tfrecord_pipeline.dataset.versions import DatasetError
from tfrecord_pipeline.read.reader import open_dataset
from tfrecord_pipeline.transforms.storage import disk, fileio, remote
from tfrecord_pipeline.transforms.tfrecord.records import RecordError, unframe


class Shard(NamedTuple):
    """What a source knows of a shard before it reads from it."""

    path: str
    index: str  # its index file: `offset size` a record
    records: int
    bytes: int


def grain_source(root: str, split: str = "train"):
    """A Grain random-access data source of `split`'s serialized tf.train.Example records, in
    the version's shard order, read from the version the dataset root `root` publishes (or
    the version folder `root`), local or gs://. `LATEST` is resolved once: a later
    publication changes nothing for this source. TFRecord shards are read by their index
    files (an IndexedTfrecordSource); ArrayRecord shards by array_record's
    ArrayRecordDataSource. Raises DatasetError (a ValueError, one line) when `root` holds no
    complete version, has no split `split`, or holds TFRecord shards converted without
    `--write_index`."""
    folder, info = open_dataset(root)
    folder = fileio.absolute(folder)  # a worker process's own folder may be another
    if split not in info.splits:
        raise DatasetError(f"no split {split!r} in {folder}; it has {sorted(info.splits)}")
    shards = info.splits[split].shards
    if info.shard_format().array_record:
        return array_record_source([fileio.join(folder, s.file) for s in shards], shards)
    if not all(shard.index for shard in shards):
        raise DatasetError(
            f"{folder} has no index files: records are read by their offsets in them; "
            "convert with --write_index (uncompressed shards)"
        )
    return IndexedTfrecordSource(
        folder,
        split,
        [
            Shard(fileio.join(folder, s.file), fileio.join(folder, s.index), s.records, s.bytes)
            for s in shards
        ],
    )


class ShardRecords(NamedTuple):
    """A shard's records as array_record's data source takes them (its FileInstruction
    protocol): with the count given, it opens no file until a record of it is read."""

    filename: str
    skip: int
    take: int
    examples_in_shard: int


def array_record_source(paths: Sequence[str], shards: Sequence) -> object:
    """array_record's ArrayRecordDataSource over the ArrayRecord files `paths`, each holding
    as many records as its shard's metadata says (empty shards left out: it takes none)."""
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    instructions = [
        ShardRecords(path, 0, shard.records, shard.records)
        for path, shard in zip(paths, shards, strict=True)
        if shard.records
    ]
    return ArrayRecordDataSource(instructions)


def record_offsets(index: bytes, shard: Shard) -> array.array:
    """Where each record of `shard` starts, then where the shard ends, from its index's bytes:
    so record `j` is bytes `offsets[j]` to `offsets[j + 1]`. RecordError unless the index
    spans the shard as its metadata describes it, record after record."""
    offsets = array.array("I" if shard.bytes + 1 < 1 << 32 else "Q", [0])
    for number, line in enumerate(index.splitlines()):
        try:
            offset, size = map(int, line.split())
        except ValueError:
            raise RecordError(f"line {number + 1} is not `offset size`") from None
        if offset != offsets[-1]:
            raise RecordError(f"record {number} at byte {offset:,}, not {offsets[-1]:,}")
        if size < 16:  # a TFRecord's framing alone is 16 bytes
            raise RecordError(f"record {number} of {size} bytes")
        offsets.append(min(offset + size, shard.bytes + 1))  # past the end: refused below
    if len(offsets) != shard.records + 1 or offsets[-1] != shard.bytes:
        raise RecordError(
            f"{len(offsets) - 1} records over {offsets[-1]:,} bytes, where the shard holds "
            f"{shard.records} over {shard.bytes:,}"
        )
    return offsets


class IndexedTfrecordSource:
    """Record `i` of a split's shards, each a serialized tf.train.Example (`bytes`): a Grain
    RandomAccessDataSource. Made by `grain_source`, which says what it reads; this module's
    docstring says what it holds."""

    def __init__(self, folder: str, split: str, shards: Sequence[Shard]):
        self._folder, self._split, self._shards = folder, split, tuple(shards)
        # The split's number of the first record of each shard, then of the records.
        counts = (shard.records for shard in self._shards)
        self._starts = array.array("q", itertools.accumulate(counts, initial=0))
        self._offsets: dict[int, array.array] = {}  # by shard number, as first read
        self._descriptors: dict[int, int] = {}  # a local shard's, as first read
        self._locks = [threading.Lock() for _ in self._shards]
        weakref.finalize(self, _close_all, self._descriptors)

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, index: SupportsIndex) -> bytes:
        position = operator.index(index)
        position += len(self) if position < 0 else 0
        if not 0 <= position < len(self):
            raise IndexError(f"record {operator.index(index)} of {len(self)}")
        number = bisect.bisect_right(self._starts, position) - 1
        shard, record = self._shards[number], position - self._starts[number]
        try:
            offsets = self._once(self._offsets, number, self._load_offsets)
            start, end = offsets[record], offsets[record + 1]
            return unframe(self._read(number, start, end))
        except (*fileio.READ_ERRORS, RecordError) as error:
            reason = getattr(error, "strerror", None) or error
            raise DatasetError(
                f"{shard.path} record {record} cannot be read ({reason}); "
                f"run verify on {self._folder}"
            ) from None

    def __repr__(self) -> str:
        return (
            f"IndexedTfrecordSource(folder={self._folder!r}, split={self._split!r}, "
            f"records={len(self)}, shards={len(self._shards)})"
        )

    def __getstate__(self) -> dict:
        """What a worker process gets: no offsets and no open file, which it makes itself."""
        return {"folder": self._folder, "split": self._split, "shards": self._shards}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def _once(self, made: dict, number: int, make: Callable[[int], object]):
        """`made[number]`, made by `make(number)` the first time any thread asks for it."""
        if (found := made.get(number)) is None:
            with self._locks[number]:
                if (found := made.get(number)) is None:
                    found = made[number] = make(number)
        return found

    def _load_offsets(self, number: int) -> array.array:
        shard = self._shards[number]
        try:
            return record_offsets(fileio.read_bytes(shard.index), shard)
        except RecordError as error:
            raise RecordError(f"its index {shard.index} does not fit it: {error}") from None

    def _read(self, number: int, start: int, end: int) -> bytes:
        path = self._shards[number].path
        if fileio.is_remote(path):
            return remote.read_range(path, start, end)
        descriptor = self._once(self._descriptors, number, lambda _: disk.open_regular(path)[0])
        return os.pread(descriptor, end - start, start)


def _close_all(descriptors: dict[int, int]) -> None:
    """Closes a source's local shards when it is collected (no file object to warn of it)."""
    for descriptor in descriptors.values():
        os.close(descriptor)
