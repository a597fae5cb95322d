"""Staged shard files joined into one: the pieces of a shard, or small shards compacted.

The Beam pipeline writes a shard larger than the target size (`--num_shards` can ask for one)
in pieces, each by a worker of its own (transforms/plan/sharding.py `piece_of`), and joins them
into the one file, with the bytes of the shard written whole; the local runner does too, and
also cuts a shard larger than its share of the run's rows, so every core writes
(transforms/local/shards.py). A refresh compacts a new version's small shards the same way
(transforms/write/carried.py). An ArrayRecord shard's pieces are ArrayRecord files too,
their records written again into the one: on an object store the joining worker's disk holds
the shard being written and the piece being read.
"""

import os
from collections import Counter
from collections.abc import Iterable, Iterator

from tfrecord_pipeline.transforms.plan.refresh import shifted_index
from tfrecord_pipeline.transforms.plan.rows_files import ROWS_SUFFIX
from tfrecord_pipeline.transforms.plan.sharding import WHOLE
from tfrecord_pipeline.transforms.storage import disk, fileio, joins
from tfrecord_pipeline.transforms.tfrecord.records import file_crc32c
from tfrecord_pipeline.transforms.write.formats import ShardFormat
from tfrecord_pipeline.transforms.write.shard_writer import INDEX_SUFFIX, ShardResult


def join_pieces(
    results: Iterable[ShardResult], staging: str, shard_format: ShardFormat
) -> Iterator[ShardResult]:
    """`results` with the pieces of each shard written in pieces joined into one, as soon as
    its last piece comes; whole shards' results as they come. Pieces that join end to end in a
    folder on this machine are appended to their shard's file as they come in order, each
    flushed to the disk (`Appended`): the join's copying and flushing is done while the other
    pieces are written, not all after the last."""
    waiting: dict[tuple[str, int], list[ShardResult]] = {}
    appended: dict[tuple[str, int], Appended] = {}
    early = shard_format.concatenates and not fileio.is_remote(staging)
    for result in results:
        if result.piece.count == 1:
            yield result
            continue
        key = (result.split, result.index)
        parts = waiting.setdefault(key, [])
        parts.append(result)
        if early:
            appended.setdefault(key, Appended(staging, result.file)).take(parts)
        if len(parts) == result.piece.count:
            done = appended.pop(key, None)
            yield join_staged(waiting.pop(key), staging, shard_format, done.staged if done else "")


class Appended:
    """A shard's staged file: its first piece's, renamed (a piece's file is its writer's
    alone, and the local runner joins once), the others appended in piece order as they come."""

    def __init__(self, staging: str, file: str):
        self.staged = fileio.staged_name(f"{file}.joined")
        self._staging = staging
        self._next = 0  # the piece to append next

    def take(self, parts: list[ShardResult]) -> None:
        """Appends those of `parts` that come next, if any, and flushes the file to the disk."""
        by_index = {part.piece.index: part for part in parts}
        sources, first = [], self._next
        while self._next in by_index:
            sources.append(fileio.join(self._staging, by_index[self._next].staged))
            self._next += 1
        if sources:
            target = fileio.join(self._staging, self.staged)
            if first == 0:  # the first piece's file becomes the shard's: its bytes stay put
                os.replace(sources.pop(0), target)
            if sources:
                disk.concatenate(sources, target, append=True)
            fileio.sync_file(target)


def join_staged(
    parts: list[ShardResult], staging: str, shard_format: ShardFormat, joined: str = ""
) -> ShardResult:
    """One staged shard holding `parts`' records in piece order (compacted whole shards: in the
    order given): their files one after another (composed on an object store, copied by the
    kernel on a disk: no byte passes through this process; the CRC-32C combined from the
    parts'), with their rows and index files alike; `joined`: the staged file they were
    already appended to (`Appended`). Where files do not join end to end (gzip: not every
    reader reads on past a gzip member's end; ArrayRecord: a file ends in its own index) the
    parts' records are written again, in order, into one file: the bytes of the shard written
    whole. The parts' files are left in staging (which the commit deletes), so a retried join
    finds them."""
    parts = sorted(parts, key=lambda part: part.piece.index)
    staged = joined or fileio.staged_name(f"{parts[0].file}.joined")
    target = fileio.join(staging, staged)
    sources = [fileio.join(staging, part.staged) for part in parts]
    if shard_format.concatenates:
        crcs = [joins.stored_crc32c(part.crc32c) for part in parts]  # no byte read again
        sizes = [part.bytes for part in parts]
        if joined:
            crc = file_crc32c(joins.combined_crc32c(crcs, sizes))
        else:
            crc = file_crc32c(joins.join_files(sources, target, crcs))
        size = sum(sizes)
    else:
        writer = shard_format.writer(target)
        for source in sources:
            for _, record in shard_format.records_at(source):
                writer.write(record)
        writer.close()
        size, crc = writer.bytes, writer.crc32c
    fileio.sync_file(target)
    # A rows file lists its records a line each: the parts' files, one after another, list
    # the joined shard's.
    joins.join_files([f"{source}{ROWS_SUFFIX}" for source in sources], f"{target}{ROWS_SUFFIX}")
    fileio.sync_file(f"{target}{ROWS_SUFFIX}")
    if parts[0].index_file:
        texts = [fileio.read_text(f"{source}{INDEX_SUFFIX}") for source in sources]
        fileio.write_synced(
            f"{target}{INDEX_SUFFIX}", shifted_index(texts, [part.bytes for part in parts]).encode()
        )
    labels: Counter = Counter()
    for part in parts:
        labels.update(dict(part.label_counts))
    return parts[0]._replace(
        records=sum(part.records for part in parts),
        bytes=size,
        crc32c=crc,
        label_counts=tuple(sorted(labels.items())),
        staged=staged,
        piece=WHOLE,
        boxes_dropped=sum(part.boxes_dropped for part in parts),
    )
