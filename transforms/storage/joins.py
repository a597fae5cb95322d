"""One file made of others, one after another: how a shard written in pieces becomes one file.

On Cloud Storage the store composes the objects, up to 32 in one request; on a local disk the
kernel copies the parts (`copy_file_range`). Either way no byte passes through this process, and
the CRC-32C of the whole comes back: the store's, or on a disk one combined from the parts' own
(as zlib's `crc32_combine` does), so the caller never reads the result again to checksum it.
"""

import base64
import functools
import os

import google_crc32c

from tfrecord_pipeline.transforms.storage import disk, fileio, jsonapi
from tfrecord_pipeline.transforms.storage.retry import retried

JOIN_CHUNK_BYTES = 8 << 20
COMPOSE_LIMIT = 32  # source objects in one compose request
CRC32C_POLYNOMIAL = 0x82F63B78  # Castagnoli's, bit-reversed, as the CRC is computed


def join_files(sources: list[str], destination: str, crcs: list[int] | None = None) -> int:
    """`destination` made of `sources`' bytes one after another; returns its CRC-32C. On a
    local disk it is combined from `crcs`, the sources' own where the caller knows them (a shard's
    pieces: their writers computed them), else from the sources read once more."""
    if fileio.is_remote(destination):
        return compose(sources, destination)
    disk.concatenate(sources, destination)
    if crcs is None:
        crcs = [_file_crc32c(source) for source in sources]
    return combined_crc32c(crcs, [os.path.getsize(source) for source in sources])


def combined_crc32c(crcs: list[int], sizes: list[int]) -> int:
    """The CRC-32C of byte strings one after another, from their CRCs and sizes."""
    crc = 0
    for part_crc, size in zip(crcs, sizes, strict=True):
        crc = crc32c_combine(crc, part_crc, size)
    return crc


def crc32c_combine(first: int, second: int, second_bytes: int) -> int:
    """The CRC-32C of two byte strings one after the other, from the first's CRC, the second's
    and the second's length. A CRC is linear over GF(2): appending n bytes multiplies the first's
    register by the operator of n zero bytes, which is made of the cached operators of 2**k zero
    bytes for the bits k of n, so a combine costs microseconds whatever the lengths."""
    power = 0
    while second_bytes:
        if second_bytes & 1:
            first = _times(_zero_bytes_operator(power), first)
        second_bytes >>= 1
        power += 1
    return first ^ second


@functools.cache
def _zero_bytes_operator(power: int) -> tuple[int, ...]:
    """The GF(2) matrix (32 columns, each a 32-bit word) that feeds 2**power zero bytes through
    a CRC-32C register."""
    if power:
        return _squared(_zero_bytes_operator(power - 1))
    one_bit = (CRC32C_POLYNOMIAL, *(1 << bit for bit in range(31)))  # shift right, reduce
    return _squared(_squared(_squared(one_bit)))  # 2, 4, then 8 zero bits


def _times(matrix: tuple[int, ...], vector: int) -> int:
    product = 0
    for column in matrix:
        if not vector:
            break
        if vector & 1:
            product ^= column
        vector >>= 1
    return product


def _squared(matrix: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(_times(matrix, column) for column in matrix)


def _file_crc32c(path: str) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(JOIN_CHUNK_BYTES):
            crc = google_crc32c.extend(crc, chunk)
    return crc


def stored_crc32c(text: str) -> int:
    """A CRC-32C as Cloud Storage reports it (base64 of the big-endian value), as a number."""
    return int.from_bytes(base64.b64decode(text), "big")


def compose(sources: list[str], destination: str) -> int:
    """`destination` made of objects `sources` (in its bucket) by one compose request
    (jsonapi.compose), sent again after a transient failure: it makes a new name, so sending it
    twice makes the same object. A shard is written in at most as many pieces
    (transforms/plan/sharding.py MAX_PIECES)."""
    if len(sources) > COMPOSE_LIMIT:
        raise ValueError(f"{len(sources)} objects, over the {COMPOSE_LIMIT} a compose joins")
    return stored_crc32c(retried(lambda: jsonapi.compose(sources, destination), destination))
