"""The files of a refreshed version, as its layout (transforms/plan/refresh.py) names them: the
published shards' kept records staged, then every final shard assembled from its sources. Both
runners call these: the local one from transforms/local/refresh.py `finish_here`, Beam from its
steps (transforms/beam/refresh.py) and its commit (pipeline/runners/beam_pipeline.py).

Each version stays self-contained, and no two share storage: a write into one version's file
never changes another's.
- a published shard whose records all stay is copied whole (on a local disk by the kernel,
  `copy_file_range`: a reflink where the file system has them; on Cloud Storage a server-side
  copy, which checks the object's CRC-32C itself): no byte passes through this process;
- one that lost records is rewritten record by record from the old file, streamed (never
  held whole), without decoding;
- a final shard of several sources (small shards compacted) is their files concatenated: a
  TFRecord file is a concatenation of records (gzip ones are written again as one stream, and
  ArrayRecord ones, whose files each end in their own index, record by record into one file).
So an ArrayRecord shard is never appended to: carried whole when it keeps every record and
nothing joins it, else written again from its records (docs/output.md).
A source's rows file is written from the records read from the published one, never copied
unread.
"""

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence

from tfrecord_pipeline.transforms.plan.refresh import FinalShard, PastShard, RefreshLayout
from tfrecord_pipeline.transforms.plan.rows_files import PastRecord, rows_file_name, write_rows_file
from tfrecord_pipeline.transforms.plan.sharding import ShardId
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write.formats import ShardFormat
from tfrecord_pipeline.transforms.write.published import PublishedVersion, ShardInfo, listed_records
from tfrecord_pipeline.transforms.write.shard_pieces import join_staged
from tfrecord_pipeline.transforms.write.shard_writer import (
    INDEX_SUFFIX,
    ShardResult,
    index_file_name,
)


def stage_past(
    published: PublishedVersion,
    source: PastShard,
    shard: ShardInfo,
    positions: Sequence[int],
    final: ShardId,
    staging: str,
) -> ShardResult:
    """The records at `positions` (ascending) of `published`'s `shard` (the layout's `source`,
    checked: transforms/storage/file_checks.py) as a staged file of the final shard `final`: the
    file copied when every record stays, else its kept records written again; its rows file
    written from the published one's as both are streamed, a record at a time."""
    folder, shard_format = published.folder, published.shard_format
    name = final.file_name(shard_format.suffix)
    staged = fileio.staged_name(name)
    target = fileio.join(staging, staged)
    if source.whole:
        size, crc = _copied(folder, shard, target)
    else:
        size, crc = _rewritten(folder, shard, positions, target, shard_format)
    labels = Counter()

    def counted(kept: Iterable[PastRecord]) -> Iterator[PastRecord]:
        for record in kept:
            labels.update(record.label_ids)
            yield record

    records = write_rows_file(target, counted(kept_records(published, shard, positions)))
    index = index_file_name(name) if shard.index else ""
    return ShardResult(
        final.split,
        final.index,
        final.count,
        name,
        records,
        size,
        crc,
        tuple(sorted(labels.items())),
        index,
        staged,
        rows_file_name(name),
    )


def kept_records(
    published: PublishedVersion, shard: ShardInfo, positions: Sequence[int]
) -> Iterator[PastRecord]:
    """The records at `positions` (ascending) of those `shard`'s rows file lists, read again
    as they are asked for (as on Beam, where another worker read them first), every one read
    through: a damage found now, after the shard was judged sound, fails the run."""
    return at_positions(listed_records(published, shard), positions)


def at_positions(items: Iterable, positions: Sequence[int]) -> Iterator:
    """Those of `items` at `positions` (ascending), every item read through; nothing held
    (not even a set of the positions: a shard of tiny images keeps hundreds of thousands)."""
    wanted = iter(positions)
    position_wanted = next(wanted, None)
    for position, item in enumerate(items):
        if position == position_wanted:
            yield item
            position_wanted = next(wanted, None)


def _copied(folder: str, shard: ShardInfo, target: str) -> tuple[int, str]:
    """The published `shard`, every record of which stays, copied whole to `target` with its
    index; returns its size and CRC-32C, the metadata's (the file was checked against them)."""
    fileio.copy(fileio.join(folder, shard.file), target)
    if shard.index:
        fileio.copy(fileio.join(folder, shard.index), f"{target}{INDEX_SUFFIX}")
    return shard.bytes, shard.crc32c


def _rewritten(
    folder: str,
    shard: ShardInfo,
    positions: Sequence[int],
    target: str,
    shard_format: ShardFormat,
) -> tuple[int, str]:
    """The records at `positions` (ascending) of the published `shard` written again to
    `target`, framed anew but never decoded, with an index when the shard had one; returns its
    size and CRC-32C. The shard is read as it is written, a record at a time
    (ShardFormat.records_at): a read that fails (damage: RecordError; the store: its error,
    after its retries) fails the refresh, and the staged file it leaves is named by no
    result."""
    records = shard_format.records_at(fileio.join(folder, shard.file))
    writer = shard_format.writer(target)
    try:
        for _, record in at_positions(records, positions):
            writer.write(record)
    finally:
        writer.close()
    fileio.sync_file(target)
    if shard.index:
        fileio.write_synced(f"{target}{INDEX_SUFFIX}", writer.index_text().encode())
    return writer.bytes, writer.crc32c


def assemble(
    layout: RefreshLayout,
    written: Iterable[ShardResult],
    carried: Mapping[str, ShardResult],
    staging: str,
    shard_format: ShardFormat,
) -> list[ShardResult]:
    """The final shards' results: each final shard's sources (`carried`: by published file;
    `written`: the converted rows' shards, by their ShardId in the write plan) as one staged
    file (joined, when there are several), named as the layout names it."""
    new = {(result.split, result.index): result for result in written}
    results = []
    for final in layout.shards:
        parts = [
            carried[source.file] if isinstance(source, PastShard) else new[source.shard[:2]]
            for source in final.sources
        ]
        joined = parts[0] if len(parts) == 1 else join_staged(parts, staging, shard_format)
        results.append(named(joined, final, shard_format))
    return results


def named(result: ShardResult, final: FinalShard, shard_format: ShardFormat) -> ShardResult:
    """A staged source's result as the final shard it stands for: its name, place and files."""
    split, index, count = final.shard
    name = final.shard.file_name(shard_format.suffix)
    return result._replace(
        split=split,
        index=index,
        count=count,
        file=name,
        index_file=index_file_name(name) if result.index_file else "",
        rows_file=rows_file_name(name),
    )
