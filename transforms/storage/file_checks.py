"""Whether a version's shards (and errors files) are the files its metadata describes: each
one's size and CRC-32C as stored, and a shard's DALI index fitting it. A refresh checks every
shard it would carry (transforms/local/refresh.py, transforms/beam/refresh.py), a rollback and
`verify` every file of the version (pipeline/dataset/version_files.py). On Cloud Storage the
object's own CRC-32C answers, from its folder's listing (a thousand a request) or its metadata,
without a byte read; elsewhere every byte is read.
"""

from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, Protocol

import google_crc32c

from tfrecord_pipeline.transforms.storage import fileio, gcs, listings
from tfrecord_pipeline.transforms.tfrecord.records import file_crc32c

CHECK_CHUNK = 1 << 20  # bytes read at a time when a shard's CRC-32C is computed here


class Described(Protocol):
    """A file as a version's metadata describes it: a shard, or an errors file."""

    file: str
    bytes: int
    crc32c: str


class DescribedShard(Described, Protocol):
    """A shard as a version's metadata describes it (transforms/write/published.py ShardInfo)."""

    records: int
    index: str  # its DALI index file, "" when it has none


def check_files(folder: str, files: list[Described], map_=map) -> Iterator[bool]:
    """Whether each file is stored with the size and CRC-32C its metadata gives. On Cloud
    Storage from the objects' listing (a thousand a request) or metadata; `map_` runs the
    listings and requests (a thread pool's, where they are requests)."""
    return _checked(folder, files, map_, lambda described: True)


def check_shards(folder: str, shards: list[DescribedShard], map_=map) -> Iterator[bool]:
    """Whether each shard's file is the one its metadata describes (`check_files`), and its
    DALI index, if it has one, fits it."""
    return _checked(folder, shards, map_, lambda shard: index_fits(folder, shard))


def _checked(folder: str, files: list, map_, also: Callable[[Any], bool]) -> Iterator[bool]:
    """Whether each of `files` is stored as described, and `also` holds for it."""
    paths = [fileio.join(folder, described.file) for described in files]
    listed = listings.listed_identities(paths, map_)

    def check(pair: tuple[str, Described]) -> bool:
        path, described = pair
        try:
            if gcs.is_gcs(path):
                found = listed.get(path) or fileio.identity(path)
                sound = found == gcs.identity(described.bytes, described.crc32c)
            else:
                sound = stored_checksum(path) == (described.bytes, described.crc32c)
            return sound and also(described)
        except fileio.UNAVAILABLE:
            raise  # the store's failure, not the file's
        except (*fileio.READ_ERRORS, ValueError):
            return False

    return map_(check, zip(paths, files, strict=True))


def stored_checksum(path: str) -> tuple[int, str]:
    """A file's size and CRC-32C as stored, read a chunk at a time."""
    with fileio.open_bytes(path, CHECK_CHUNK) as handle:
        counted = Checksummed(handle)
        counted.drain(CHECK_CHUNK)
    return counted.bytes, counted.crc32c


class Checksummed:
    """A binary stream whose reads are counted and run through CRC-32C as they pass: a file's
    size and CRC-32C known once it is read (verify reads a shard's records through one, with
    no second read of it and never the file in memory)."""

    def __init__(self, stream: BinaryIO):
        self._stream, self.bytes, self._crc = stream, 0, 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._crc = google_crc32c.extend(self._crc, data)
        self.bytes += len(data)
        return data

    def drain(self, chunk: int) -> None:
        """The rest of the stream read (and counted), `chunk` bytes at a time."""
        while self.read(chunk):
            pass

    @property
    def crc32c(self) -> str:
        return file_crc32c(self._crc)


def index_fits(folder: str, shard: DescribedShard) -> bool:
    """Whether a shard's DALI index (if it has one) lists a span a record, one after another,
    to the shard's end: what it must be to describe the file checked."""
    if not shard.index:
        return True
    expected, spans = 0, 0
    for line in fileio.read_text(fileio.join(folder, shard.index)).splitlines():
        offset, size = map(int, line.split())  # a ValueError when it is not "offset size"
        if offset != expected:
            return False
        expected, spans = offset + size, spans + 1
    return spans == shard.records and expected == shard.bytes
