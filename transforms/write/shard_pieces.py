"""Staged shard files joined into one: the pieces of a shard, or small shards compacted.

The Beam pipeline writes a shard larger than the target size (`--num_shards` can ask for one)
in pieces, each by a worker of its own (transforms/plan/sharding.py `piece_of`), and joins them
into the one file, with the bytes of the shard written whole; the local runner does too, and
also cuts a shard larger than its share of the run's rows, so every core writes
(`pieces_for_cores`). A refresh compacts a new version's small shards the same way
(pipeline/runners/refresh_files.py).
"""

from collections import Counter
from collections.abc import Iterable, Iterator

from tfrecord_pipeline.transforms.plan.refresh import shifted_index
from tfrecord_pipeline.transforms.plan.rows_files import ROWS_SUFFIX
from tfrecord_pipeline.transforms.plan.sharding import WHOLE
from tfrecord_pipeline.transforms.storage import fileio, joins
from tfrecord_pipeline.transforms.tfrecord.records import (
    ShardFileWriter,
    file_crc32c,
    read_records,
    shard_payload,
)
from tfrecord_pipeline.transforms.write.shard_writer import INDEX_SUFFIX, ShardResult, WriteConfig


def joinable(config: WriteConfig) -> bool:
    """Whether shards of this format can be written in pieces and joined: TFRecord files
    concatenate (record framing carries no file header or footer). A format whose files do not
    must return False here: its shards are then written whole."""
    return True


def join_pieces(results: Iterable[ShardResult], staging: str, compress: bool) -> Iterator:
    """`results` with the pieces of each shard written in pieces joined into one, as soon as
    its last piece comes; whole shards' results as they come."""
    waiting: dict[tuple[str, int], list[ShardResult]] = {}
    for result in results:
        if result.piece.count == 1:
            yield result
            continue
        parts = waiting.setdefault((result.split, result.index), [])
        parts.append(result)
        if len(parts) == result.piece.count:
            yield join_staged(waiting.pop((result.split, result.index)), staging, compress)


def join_staged(parts: list[ShardResult], staging: str, compress: bool) -> ShardResult:
    """One staged shard holding `parts`' records in piece order: their files one after another (on
    an object store, composed there: no byte passes through this process), with their rows and
    index files alike. Gzip parts are written again record by record as one gzip stream: not
    every reader reads on past a gzip member's end. The parts' files are left in staging
    (which the commit deletes), so a retried join finds them."""
    parts = sorted(parts, key=lambda part: part.piece.index)
    staged = fileio.staged_name(f"{parts[0].file}.joined")
    target = fileio.join(staging, staged)
    sources = [fileio.join(staging, part.staged) for part in parts]
    if compress:
        writer = ShardFileWriter(fileio.create(target), compress=True)
        for source in sources:
            for _, record in read_records(shard_payload(fileio.read_bytes(source), "gzip")):
                writer.write(record)
        writer.close()
        size, crc = writer.bytes, writer.crc32c
    else:
        size, crc = (
            sum(part.bytes for part in parts),
            file_crc32c(joins.join_files(sources, target)),
        )
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
