"""A container that cannot be read at random, unpacked once while it is listed.

A gzip-compressed tar, or a Parquet or Arrow file holding image bytes, has no byte range a
shard writer could read an image from. So the listing, which streams the container anyway,
appends each image's bytes to one staged file of the run's own (`unpacked-*` in its staging
folder, deleted when the version is committed), and the image's `Member` points into it: the
shard writer reads it with one positioned or ranged read, as it reads a tar member. The
Member's identity is the original's, so a refresh knows the image again by its own bytes.

A name is fresh per listing (the container's hash and a random suffix), so two workers listing
two containers, or a retried listing of the same one, never write into a file rows already
point into. An image over the --max_file_mb limit is never copied: its Member has its size
and no bytes, which the shard writer makes its `file_too_large` error row (read_member), so
the staged file holds only what will be converted.
"""

import hashlib
import os
import shutil
import tempfile

from tfrecord_pipeline.transforms.archive.members import Member, read_member
from tfrecord_pipeline.transforms.storage import fileio

COPY_BYTES = 1 << 20  # a member is copied through a buffer of this size, never held whole
PREFIX = "unpacked-"


class CutShortError(EOFError):
    """A member's stream ended before its size: the container is cut short."""


class Unpacked:
    """The staged file one listing of `container` unpacks into; a context manager that closes
    it (and, for a staging folder on a store, uploads it) when the listing ends."""

    def __init__(self, folder: str, container: str, max_bytes: int):
        digest = hashlib.sha256(container.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        self.path = fileio.join(folder, f"{PREFIX}{digest}-{os.urandom(4).hex()}")
        self.max_bytes = max_bytes
        self._handle = None  # opened by the first image: a listing of none makes no file
        self._at = 0

    def __enter__(self) -> "Unpacked":
        return self

    def __exit__(self, *failure) -> None:
        self.close()

    def copy(self, source, size: int, identity: str) -> Member:
        """The next `size` bytes of the stream `source`, appended; a stream that ends sooner
        raises CutShortError. Over the limit, nothing is read (`too_large`)."""
        if size > self.max_bytes:
            return self.too_large(size, identity)
        handle, start = self._open(), self._at
        left = size
        while left:
            chunk = source.read(min(left, COPY_BYTES))
            if not chunk:
                raise CutShortError(f"it ends {left:,} bytes before the member's end")
            handle.write(chunk)
            self._at += len(chunk)
            left -= len(chunk)
        return Member(self.path, start, size, size, identity=identity)

    def add(self, data: bytes, identity: str) -> Member:
        """`data` (an image a Parquet or Arrow cell held), appended unless over the limit."""
        if len(data) > self.max_bytes:
            return self.too_large(len(data), identity)
        start = self._at
        self._open().write(data)
        self._at += len(data)
        return Member(self.path, start, len(data), len(data), identity=identity)

    def too_large(self, size: int, identity: str) -> Member:
        """A member of `size` bytes, none of them staged: reading it is a file_too_large error."""
        return Member(self.path, 0, 0, size, identity=identity)

    def read(self, member: Member, uri: str, max_bytes: int) -> bytes:
        """A member's bytes while the listing still writes the file (a WebDataset sample's
        label member, read before its image's row is made)."""
        if self._handle is not None:
            self._handle.flush()
            member = member._replace(container=self._handle.name)
        return read_member(member, uri, max_bytes)

    def _open(self):
        if self._handle is None:
            if fileio.is_remote(self.path):  # read back while listing, uploaded at close
                self._handle = tempfile.NamedTemporaryFile(prefix=PREFIX)  # noqa: SIM115
            else:
                self._handle = fileio.create(self.path)
        return self._handle

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is None:
            return
        if fileio.is_remote(self.path):
            handle.flush()
            handle.seek(0)
            with fileio.create(self.path) as upload:
                shutil.copyfileobj(handle, upload, COPY_BYTES)
        handle.close()
