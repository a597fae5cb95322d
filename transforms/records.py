"""TFRecord framing, and a shard file writer that streams records and fingerprints the file.

A TFRecord is `uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)`,
all little-endian. The CRC is CRC-32C (Castagnoli) from the C implementation in `google-crc32c`.
"""

import gzip
import hashlib
import struct

import google_crc32c

# TensorFlow refuses records whose serialized proto exceeds 2 GiB and the TPU readers
# cannot hold records near that; we cap a record at 1 GiB.
MAX_RECORD_BYTES = 1 << 30

_MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    """CRC-32C rotated and offset, as TFRecord stores it (so a CRC of CRCs is not trivial)."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(record: bytes) -> bytes:
    """The bytes of one TFRecord holding `record`."""
    length = struct.pack("<Q", len(record))
    return b"".join(
        (
            length,
            struct.pack("<I", masked_crc32c(length)),
            record,
            struct.pack("<I", masked_crc32c(record)),
        )
    )


class _HashingSink:
    """File-like wrapper that counts and SHA-256s every byte that reaches the file."""

    def __init__(self, raw):
        self._raw = raw
        self.sha256 = hashlib.sha256()
        self.bytes = 0

    def write(self, data) -> int:
        self.sha256.update(data)
        self.bytes += len(data)
        return self._raw.write(data)

    def flush(self) -> None:
        self._raw.flush()


class ShardFileWriter:
    """Writes framed records to an open binary file, optionally gzip-compressed.

    The gzip header carries no name and no timestamp, so equal records give equal files.
    `sha256` and `bytes` describe the file as stored (after compression).
    """

    def __init__(self, raw_file, compress: bool = False):
        self._raw = raw_file
        self._sink = _HashingSink(raw_file)
        self._out = (
            gzip.GzipFile(filename="", mode="wb", fileobj=self._sink, mtime=0)
            if compress
            else self._sink
        )
        self.records = 0

    def write(self, record: bytes) -> None:
        self._out.write(frame(record))
        self.records += 1

    def close(self) -> None:
        if self._out is not self._sink:
            self._out.close()  # writes the gzip trailer into the sink
        self._raw.close()

    @property
    def sha256(self) -> str:
        return self._sink.sha256.hexdigest()

    @property
    def bytes(self) -> int:
        return self._sink.bytes
