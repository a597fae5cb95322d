"""TFRecord framing, and a shard file writer that streams records and fingerprints the file.

A TFRecord is `uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)`,
all little-endian. The CRC is CRC-32C (Castagnoli) from the C implementation in `google-crc32c`.
"""

import array
import base64
import gzip
import io
import itertools
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

import google_crc32c

# TensorFlow refuses records whose serialized proto exceeds 2 GiB and the TPU readers
# cannot hold records near that; we cap a record at 1 GiB.
MAX_RECORD_BYTES = 1 << 30
READ_BYTES = 1 << 20  # a streamed shard's read buffer, and the most one inflation gives at once

_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    """CRC-32C rotated and offset, as TFRecord stores it (so a CRC of CRCs is not trivial)."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame_parts(record: bytes) -> tuple[bytes, bytes, bytes]:
    """One TFRecord as (header, record, footer): written in turn, the record is never copied."""
    length = struct.pack("<Q", len(record))
    header = length + struct.pack("<I", masked_crc32c(length))
    return header, record, struct.pack("<I", masked_crc32c(record))


def frame(record: bytes) -> bytes:
    """The bytes of one TFRecord holding `record`."""
    return b"".join(frame_parts(record))


def file_crc32c(crc: int) -> str:
    """A whole file's CRC-32C as Cloud Storage reports it (base64 of the big-endian value), so a
    shard can be checked against its object metadata without being downloaded."""
    return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")


def crc32c_of(data: bytes) -> str:
    return file_crc32c(google_crc32c.value(data))


class RecordError(Exception):
    """A shard's bytes are not valid TFRecord framing; says which record and where."""


class _GzipError(RecordError):
    """A gzip shard's bytes are not valid gzip; says where."""


def records_in(stream: BinaryIO, compression: str = "none") -> Iterator[tuple[int, bytes]]:
    """(offset in the payload, record) for every record of a shard file read from `stream`, a
    record at a time, gunzipped as it streams when compressed, both CRCs checked: memory holds
    the read buffers (READ_BYTES each) and one record, never the file, however large."""
    if compression == "gzip":
        stream = io.BufferedReader(_Pieces(_gunzipped(stream.read)), READ_BYTES)
    position, index = 0, 0
    try:
        while (record := _next_record(stream.read)) is not None:
            yield position, record
            position, index = position + len(record) + 16, index + 1
    except _GzipError:
        raise  # the file's damage, at a byte of the file: not a record's
    except RecordError as error:
        raise RecordError(f"record {index} at byte {position}: {error}") from None


def read_records(data: bytes) -> Iterator[tuple[int, bytes]]:
    """`records_in` of a shard's (uncompressed) bytes."""
    return records_in(io.BytesIO(data))


def unframe(framed: bytes) -> bytes:
    """The record of one TFRecord's bytes, read alone by its offset and size (as an index
    gives them), both CRCs checked; RecordError when they are not one whole record."""
    stream = io.BytesIO(framed)
    record = _next_record(stream.read)
    if record is None:
        raise RecordError("truncated header")
    if stream.tell() != len(framed):
        raise RecordError(
            f"{len(framed):,} bytes, of which its length field frames {stream.tell():,}"
        )
    return record


def _next_record(read: Callable[[int], bytes]) -> bytes | None:
    """The record framed next in what `read` gives (None at its end); RecordError saying what
    is wrong. A length over MAX_RECORD_BYTES is damage (no writer here makes one), never a
    buffer of that size asked for."""
    header = read(12)
    if not header:
        return None
    if len(header) < 12:
        raise RecordError("truncated header")
    (length,) = struct.unpack_from("<Q", header)
    if struct.unpack_from("<I", header, 8)[0] != masked_crc32c(header[:8]):
        raise RecordError("length CRC mismatch")
    if length > MAX_RECORD_BYTES:
        raise RecordError(f"a length of {length:,} bytes, over the {MAX_RECORD_BYTES:,} cap")
    record, footer = read(length), read(4)
    if len(record) < length or len(footer) < 4:
        raise RecordError("truncated data")
    if struct.unpack("<I", footer)[0] != masked_crc32c(record):
        raise RecordError("data CRC mismatch")
    return record


def _gunzipped(read: Callable[[int], bytes]) -> Iterator[bytes]:
    """Every gzip member's bytes, in pieces of at most READ_BYTES, from compressed bytes `read`
    READ_BYTES at a time. TensorFlow's reader may stop at a member that holds nothing (where
    the member falls in its buffers decides), so such a member before more data is an error
    here, rather than records read past it that training may never see."""
    position, data = 0, read(READ_BYTES)  # position: where `data` starts in the file
    while data:
        member, inflater, held = position, zlib.decompressobj(wbits=16 + zlib.MAX_WBITS), 0
        while not inflater.eof:  # a gzip wrapper, its CRC and length checked at its end
            try:
                piece = inflater.decompress(data, READ_BYTES)
            except zlib.error as error:
                raise _GzipError(f"not valid gzip ({error})") from None
            rest = inflater.unconsumed_tail or inflater.unused_data
            position, data, held = position + len(data) - len(rest), rest, held + len(piece)
            if piece:
                yield piece
            elif not data and not inflater.eof and not (data := read(READ_BYTES)):
                raise _GzipError(f"not valid gzip (the member at byte {member:,} is cut short)")
        data = data or read(READ_BYTES)
        if not held and data:
            raise _GzipError(
                f"an empty gzip member at byte {member:,}: TensorFlow's reader may stop "
                "there, before the bytes after it"
            )


class _Pieces(io.RawIOBase):
    """Pieces of bytes, as a stream a BufferedReader reads from."""

    def __init__(self, pieces: Iterator[bytes]):
        super().__init__()
        self._pieces, self._left = pieces, memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not self._left:
            self._left = memoryview(next(self._pieces, b""))
        count = min(len(buffer), len(self._left))
        buffer[:count], self._left = self._left[:count], self._left[count:]
        return count


class _ChecksumSink:
    """File-like wrapper that counts every byte that reaches the file and runs its CRC-32C.

    CRC-32C rather than a cryptographic hash: it runs at memory speed (a SHA-256 of every shard
    byte cost more than framing them), it is what Cloud Storage keeps for every object, and
    each record inside is CRC-checked anyway."""

    def __init__(self, raw):
        self._raw = raw
        self.crc = 0
        self.bytes = 0

    def write(self, data) -> int:
        self.crc = google_crc32c.extend(self.crc, data)
        self.bytes += len(data)
        return self._raw.write(data)

    def flush(self) -> None:
        self._raw.flush()


class ShardFileWriter:
    """Writes framed records to an open binary file, optionally gzip-compressed.

    The gzip header carries no name and no timestamp, so equal records give equal files.
    `crc32c` and `bytes` describe the file as stored (after compression).
    """

    def __init__(self, raw_file, compress: bool = False):
        self._raw = raw_file
        self._sink = _ChecksumSink(raw_file)
        self._out = (
            gzip.GzipFile(filename="", mode="wb", fileobj=self._sink, mtime=0)
            if compress
            else self._sink
        )
        self._sizes = array.array("Q")  # each framed record's size: 8 bytes a record

    @property
    def records(self) -> int:
        return len(self._sizes)

    def write(self, record: bytes) -> None:
        size = 0
        for part in frame_parts(record):
            self._out.write(part)
            size += len(part)
        self._sizes.append(size)

    def index_text(self) -> str:
        """NVIDIA DALI's TFRecord index: `offset size` per record, offsets in the raw file."""
        offsets = itertools.accumulate(self._sizes, initial=0)  # one more: the file's end
        spans = zip(offsets, self._sizes, strict=False)
        return "".join(f"{offset} {size}\n" for offset, size in spans)

    def close(self) -> None:
        if self._out is not self._sink:
            self._out.close()  # writes the gzip trailer into the sink
        self._raw.close()

    @property
    def crc32c(self) -> str:
        return file_crc32c(self._sink.crc)

    @property
    def bytes(self) -> int:
        return self._sink.bytes
