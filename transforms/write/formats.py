"""The kinds of shard file a version holds: TFRecord, gzip TFRecord (`--compression gzip`) and
ArrayRecord (`--file_format array_record`).

One value, from the two flags or a version's metadata, answers everything that differs between
them, so the writers, the joins, a refresh and the readers ask it rather than the flags: the
file's suffix, its writer, how its records are read, and whether files of records joined end
to end are one file of them all.
"""

import io
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.tfrecord.records import READ_BYTES, ShardFileWriter, records_in
from tfrecord_pipeline.transforms.write import array_records

FILE_FORMATS = ("tfrecord", "array_record")  # TFDS's names for them


class ShardFormat(NamedTuple):
    file_format: str = "tfrecord"  # one of FILE_FORMATS
    compression: str = "none"  # "gzip": a TFRecord file as one gzip stream
    # False: shards named without the format's extension (`train-00000-of-01024`), as readers
    # that build the names themselves want them (the TPU reference readers: --preset).
    extension: bool = True

    @property
    def array_record(self) -> bool:
        return self.file_format == "array_record"

    @property
    def suffix(self) -> str:
        if not self.extension:
            return ""
        if self.array_record:
            return array_records.SUFFIX
        return ".tfrecord.gz" if self.compression == "gzip" else ".tfrecord"

    @property
    def concatenates(self) -> bool:
        """Whether shard files joined end to end are one shard file: uncompressed TFRecord
        only. Not every reader reads on past a gzip member's end, and an ArrayRecord file ends
        in the index of its own records."""
        return not self.array_record and self.compression != "gzip"

    def writer(self, path: str):
        """A writer of records into a new file at `path`: `write(record)`, `close()`, then
        its `records`, `bytes` and `crc32c` (and, for TFRecord, `index_text()`)."""
        if self.array_record:
            return array_records.ArrayRecordShardWriter(path)
        return ShardFileWriter(fileio.create(path), compress=self.compression == "gzip")

    def records_at(self, path: str) -> Iterator[tuple[int, bytes]]:
        """`records_in` the shard file at `path`, streamed: memory holds buffers and a record
        or a batch, never the file (a refresh rewrites shards of --target_shard_mb so). A
        TFRecord file a record at a time, gunzipped as it streams, from fileio.open_bytes (a
        local file READ_BYTES at a time; an object by ranged requests, resumed where a
        transient failure cut them), opened here: a missing one raises before a record is
        asked for. An ArrayRecord file by index, array_records.READ_BATCH records at a time
        (its reader's readahead is bounded too); its reader takes local paths only, so an
        object is downloaded into a temporary file first, in chunks: disk holds it, not
        memory."""
        if self.array_record:
            return array_records.read_array_record_path(path)
        return _closed_after(fileio.open_bytes(path, READ_BYTES), self.compression)

    def records_in(self, stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
        """(offset in the TFRecord payload, or index in an ArrayRecord file; record) for every
        record of a shard file read from `stream` (a buffered one: TFRecord framing reads a
        header's bytes at a time), checked as the format checks them (RecordError), the
        stream the caller's to close. Streamed as `records_at` streams, an ArrayRecord file
        through a temporary file: verify reads a shard so, counting its bytes as they pass."""
        if self.array_record:
            return array_records.array_records_in(stream)
        return records_in(stream, self.compression)


def _closed_after(stream: BinaryIO, compression: str) -> Iterator[tuple[int, bytes]]:
    """`records_in` a stream read through READ_BYTES of buffer, closed when its records are
    read (or the reading stops)."""
    with io.BufferedReader(stream, READ_BYTES) as buffered:
        yield from records_in(buffered, compression)
