"""TFRecord framing, and a shard file writer that streams records and fingerprints the file.

A TFRecord is `uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)`,
all little-endian. The CRC is CRC-32C (Castagnoli) from the C implementation in `google-crc32c`.
"""

import array
import base64
import gzip
import itertools
import struct
import zlib
from collections.abc import Iterator

import google_crc32c

# TensorFlow refuses records whose serialized proto exceeds 2 GiB and the TPU readers
# cannot hold records near that; we cap a record at 1 GiB.
MAX_RECORD_BYTES = 1 << 30

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


def shard_payload(data: bytes, compression: str) -> bytes:
    """A shard file's bytes as records are framed in them: gunzipped when compressed."""
    if compression != "gzip":
        return data
    try:
        return _gunzipped(data)
    except zlib.error as error:
        raise RecordError(f"not valid gzip ({error})") from None


def _gunzipped(data: bytes) -> bytes:
    """Every gzip member's bytes, joined. TensorFlow's reader may stop at a member that holds
    nothing (where the member falls in its buffers decides), so such a member before more data
    is an error here, rather than records read past it that training may never see."""
    members, position, view = [], 0, memoryview(data)
    while position < len(data):
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # a gzip wrapper, checked
        member = inflater.decompress(view[position:])
        if not inflater.eof:
            raise RecordError(f"not valid gzip (the member at byte {position:,} is cut short)")
        after = len(inflater.unused_data)
        if not member and after:
            raise RecordError(
                f"an empty gzip member at byte {position:,}: TensorFlow's reader may stop "
                f"there, before the {after:,} bytes after it"
            )
        members.append(member)
        position = len(data) - after
    return b"".join(members)


def read_records(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, record) for every record of a shard's (uncompressed) bytes, both CRCs checked."""
    position, index = 0, 0
    while position < len(data):
        header = data[position : position + 12]
        if len(header) < 12:
            raise RecordError(f"record {index} at byte {position}: truncated header")
        (length,) = struct.unpack_from("<Q", header)
        if struct.unpack_from("<I", header, 8)[0] != masked_crc32c(header[:8]):
            raise RecordError(f"record {index} at byte {position}: length CRC mismatch")
        end = position + 12 + length
        if end + 4 > len(data):
            raise RecordError(f"record {index} at byte {position}: truncated data")
        record = data[position + 12 : end]
        if struct.unpack_from("<I", data, end)[0] != masked_crc32c(record):
            raise RecordError(f"record {index} at byte {position}: data CRC mismatch")
        yield position, record
        position, index = end + 4, index + 1


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
