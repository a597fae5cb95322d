"""One file made of others, one after another: how a shard written in pieces becomes one file.

On Cloud Storage the store composes the objects (no byte passes through this process), up to
32 in one request; a local file is streamed together from its parts. Either way the CRC-32C of
the whole comes back, so the caller never reads the result again to checksum it.
"""

import base64

import google_crc32c

from tfrecord_pipeline.transforms.storage import disk, fileio, jsonapi
from tfrecord_pipeline.transforms.storage.retry import retried

JOIN_CHUNK_BYTES = 8 << 20
COMPOSE_LIMIT = 32  # source objects in one compose request


def join_files(sources: list[str], destination: str) -> int:
    """`destination` made of `sources`' bytes one after another; returns its CRC-32C."""
    if fileio.is_remote(destination):
        return compose(sources, destination)
    crc = 0
    with disk.create(destination) as out:
        for source in sources:
            with open(source, "rb") as handle:
                while chunk := handle.read(JOIN_CHUNK_BYTES):
                    crc = google_crc32c.extend(crc, chunk)
                    out.write(chunk)
    return crc


def compose(sources: list[str], destination: str) -> int:
    """`destination` made of objects `sources` (in its bucket) by one compose request
    (jsonapi.compose), sent again after a transient failure: it makes a new name, so sending it
    twice makes the same object. A shard is written in at most as many pieces
    (transforms/plan/sharding.py MAX_PIECES)."""
    if len(sources) > COMPOSE_LIMIT:
        raise ValueError(f"{len(sources)} objects, over the {COMPOSE_LIMIT} a compose joins")
    crc32c = retried(lambda: jsonapi.compose(sources, destination), destination)
    return int.from_bytes(base64.b64decode(crc32c), "big")
