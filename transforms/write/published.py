"""A published version as the conversion reads it back: its shards as its metadata
(`tfrecord_pipeline.json`) describes them, and, for a refresh, the version itself (its folder,
its kind of shard file, its shards by split) and the records each shard's rows file lists.

The pipeline builds a `PublishedVersion` from the version it resolved (pipeline/dataset/previous.py
`Previous.published`); the refresh's forms (transforms/local/refresh.py,
transforms/beam/refresh.py) and the carrying of its files (transforms/write/carried.py) read
only this, so the conversion logic never reaches into the pipeline.
"""

import dataclasses
from collections.abc import Iterator
from typing import NamedTuple

from tfrecord_pipeline.transforms.plan.refresh_match import PastKey
from tfrecord_pipeline.transforms.plan.rows_files import (
    DamagedRowsFileError,
    PastRecord,
    read_rows_file,
)
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write.formats import ShardFormat


@dataclasses.dataclass
class ShardInfo:
    """A shard as a version's metadata describes it."""

    file: str
    records: int
    bytes: int
    crc32c: str  # of the file, base64 big-endian: what `gcloud storage objects describe` shows
    index: str = ""  # the DALI index file beside the shard, with --write_index
    rows: str = ""  # the rows file a refresh reads: key, fingerprint, label id per record


class PublishedVersion(NamedTuple):
    """The published version a refresh reads: its folder, the kind of its shard files, and
    (split, shard) of every shard, in its metadata's order."""

    folder: str
    shard_format: ShardFormat
    shards: tuple[tuple[str, ShardInfo], ...]

    def by_file(self) -> dict[str, ShardInfo]:
        """Its shards by file name."""
        return {shard.file: shard for _, shard in self.shards}


def listed_records(published: PublishedVersion, shard: ShardInfo) -> Iterator[PastRecord]:
    """The records `shard`'s rows file lists, read as they are asked for, never held (a shard
    of tiny images lists hundreds of thousands): DamagedRowsFileError when it cannot be
    opened, or where the reading finds it damaged (transforms/plan/rows_files.py)."""
    return read_rows_file(fileio.join(published.folder, shard.rows), shard.records)


def listed_keys(
    published: PublishedVersion, shard: ShardInfo, sound: bool, unlisted: set[str]
) -> Iterator[PastKey]:
    """The records `shard`'s rows file lists, as the match takes them (`sound`: the shard
    passed its check), read a record at a time as they are asked for. The file is opened now
    (on an object store a request, so a runner may open a few ahead). One that cannot be
    opened, or is found damaged midway, ends them and its shard's file is added to
    `unlisted`: the records given before the damage are left out where rows meet records
    (transforms/plan/refresh_match.py `listed`), on both runners, and the shard is damaged."""
    try:
        records = listed_records(published, shard)
    except DamagedRowsFileError:
        unlisted.add(shard.file)
        return iter(())
    return _keys(records, shard, sound, unlisted)


def _keys(
    records: Iterator[PastRecord], shard: ShardInfo, sound: bool, unlisted: set[str]
) -> Iterator[PastKey]:
    try:
        for position, record in enumerate(records):
            yield PastKey(record.key, record.fingerprint, shard.file, position, sound)
    except DamagedRowsFileError:
        unlisted.add(shard.file)
