"""Cloud Storage requests, each one through the one retry layer (transforms/storage/retry.py).

Beam's gs:// reader asks for an object's metadata before its media, and fingerprinting asked once
more: three requests, where the media response alone tells what is needed (the body, and its
CRC-32C in X-Goog-Hash). So an image is read here with one GET of its media, nothing before it,
sent on a connection of its own (transforms/storage/jsonapi.py: a fifth of the Python client's CPU).
Metadata, ranged reads of manifests and listing pages are GETs there too; the Python client is
left the generation-pinned read of a small object (`read_generation`). A `gs://` folder is listed
a page at a time; a manifest is read as one stream where it is read on (`RangeReader`)."""

import contextlib
import functools
import io
from collections.abc import Iterator
from typing import NamedTuple

from tfrecord_pipeline.transforms.storage import connection as connections
from tfrecord_pipeline.transforms.storage import jsonapi
from tfrecord_pipeline.transforms.storage.retry import (
    TIMEOUT_S,
    CorruptTransferError,
    StoreUnavailableError,
    retried,
)


def is_gcs(path: str) -> bool:
    """A Cloud Storage path, which this module's requests serve (other stores: Beam's)."""
    return path.startswith("gs://")


def split(path: str) -> tuple[str, str]:
    """("bucket", "object name") of a gs:// path."""
    bucket, _, name = path.removeprefix("gs://").partition("/")
    return bucket, name


# Connections a process keeps open for reuse: more than its threads ever use at once (requests'
# default of 10 would close and reopen the connections of any more threads, warning each time).
GCS_CONNECTIONS = 256


@functools.cache
def client():
    """One Cloud Storage client per process (STORAGE_EMULATOR_HOST points it at an emulator), its
    connections shared by all threads, pooled as its maintainers advise (python-storage#253)."""
    import requests
    from google.cloud import storage

    client = storage.Client()
    pool = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=GCS_CONNECTIONS)
    for scheme in ("https://", "http://"):
        client._http.mount(scheme, pool)
    return client


class Read(NamedTuple):
    data: bytes
    identity: str  # see `identity`


def identity(size: int, crc32c: str) -> str:
    """What tells an object's versions apart: its size and CRC-32C (as Cloud Storage gives it,
    base64), which its metadata and every download of it both carry."""
    return f"{size}:{crc32c}"


def read(path: str, max_bytes: int | None) -> Read | None:
    """The object's bytes and identity in one request (a GET of its media, transforms/storage/
    jsonapi.py, its body checked against the CRC-32C its response announces; retried when it
    fails transiently); None when it holds more than `max_bytes`. A missing object raises
    FileNotFoundError, one the caller may not read PermissionError."""
    media = retried(lambda: jsonapi.media(path, max_bytes), path)
    return None if media is None else Read(media.data, identity(len(media.data), media.crc32c))


class Stat(NamedTuple):
    size: int
    identity: str


def stat(path: str) -> Stat:
    """Size and identity from the object's metadata (one request); FileNotFoundError if none."""
    found = retried(lambda: jsonapi.metadata(path), path)
    size = int(found["size"])
    return Stat(size, identity(size, found["crc32c"]))


def read_generation(path: str) -> tuple[bytes, int] | None:
    """A small object's bytes and their generation (None: no object): metadata, then that
    generation's media, never one generation's bytes under another's number."""
    from google.api_core.exceptions import NotFound

    bucket, name = split(path)
    metadata = functools.partial(client().bucket(bucket).get_blob, name, retry=None)
    while blob := retried(metadata, path):
        exact = client().bucket(bucket).blob(name, generation=blob.generation)
        media = functools.partial(exact.download_as_bytes, retry=None, timeout=TIMEOUT_S)
        with contextlib.suppress(NotFound):  # rewritten between the two requests: read again
            return retried(media, path), blob.generation
    return None


def read_range(path: str, start: int, end: int) -> bytes:
    """Bytes `start` to `end` (exclusive) of an object from one ranged request, retried as any
    read here, an empty answer where the object has bytes too (a cut body, not its end)."""

    def ranged() -> bytes:
        data = jsonapi.media_range(path, start, end)
        if not data:
            raise CorruptTransferError(f"{path}: no bytes at {start:,}")
        return data

    return retried(ranged, path)


class RangeReader(io.RawIOBase):
    """An object as a seekable stream, a manifest of gigabytes never downloaded whole: a read
    from its start, or going on where a range ended, asks the rest of the object in one ranged
    GET, read from the answer as asked; a read elsewhere (a piece of a manifest, a footer)
    asks the bytes asked. The answers come on a connection of the reader's own, closed with it or
    when it leaves an answer unread (a seek elsewhere): the store then sends no more than the
    connection's buffers hold. A transient failure (retried as any read here) asks again from
    where the read stopped.

    An archive is read as one stream: `stop`, where every ask ends (a run of members, not the
    rest of the object), and `read_through`, the longest forward seek that reads on through
    the answer rather than leaving it for a new request (the headers and members a listing
    or a run passes over)."""

    def __init__(self, path: str, stop: int | None = None, read_through: int = 0):
        super().__init__()
        self._path = path
        self._size = stat(path).size if stop is None else stop
        self._read_through = read_through
        self._position = 0
        self._end = -1  # where the range last asked ends (-1: none, or left by a seek)
        self._connection = None
        self._answer = None  # the answer being read, its body not yet read to its end

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        position = max(0, base + offset)
        ahead = position - self._position
        if self._answer is not None and 0 < ahead <= self._read_through:
            self._pass(ahead)
        elif position != self._position:
            self._drop()
            self._end = -1
        self._position = position
        return position

    def _pass(self, count: int) -> None:
        """Reads `count` bytes on from the position and drops them, a megabyte at a time."""
        skipped = bytearray(min(count, 1 << 20))
        while count and (read := self.readinto(memoryview(skipped)[: min(count, len(skipped))])):
            count -= read

    def readinto(self, buffer) -> int:
        if self._position >= self._size or not len(buffer):
            return 0
        count = retried(lambda: self._read_into(memoryview(buffer)), self._path)
        self._position += count
        return count

    def _read_into(self, buffer: memoryview) -> int:
        if self._answer is None:
            self._ask(len(buffer))
        try:
            count = self._answer.readinto(buffer[: self._end - self._position])
        except BaseException:
            self._drop()
            raise
        if not count:  # nothing where the object has bytes: a cut body, not its end
            self._drop()
            raise CorruptTransferError(f"{self._path}: no bytes at {self._position:,}")
        if self._position + count == self._end:  # read whole: the connection carries the next
            self._answer = None
        return count

    def _ask(self, asked: int) -> None:
        """A ranged GET from the position: the rest of a range cut short, the rest of the
        object from its start or where the last range ended, else the bytes asked."""
        if self._position == self._end or (self._position == 0 and self._end < 0):
            self._end = self._size  # reading on, or from the start: a whole file, mostly
        elif self._position > self._end:
            self._end = min(self._size, self._position + asked)
        self._connection = connections.own_connection(self._connection)
        self._answer = jsonapi.media_from(self._connection, self._path, self._position, self._end)

    def _drop(self) -> None:
        """The answer being read left unread: its connection closed, never reused."""
        if self._answer is not None:
            self._connection.close()
            self._answer = None

    def close(self) -> None:
        self._drop()
        if self._connection is not None:
            self._connection.close()
        super().close()


def folder_prefix(folder: str) -> tuple[str, str]:
    """A `gs://` folder's bucket, and the prefix its objects' names start with ("" at the top)."""
    bucket, prefix = split(folder)
    return bucket, prefix.rstrip("/") + "/" if prefix.strip("/") else ""


def list_folder(folder: str) -> Iterator[tuple[str, bool]]:
    """(name, whether a subfolder) of what is directly in a `gs://` folder: its objects as the
    listing streams them (in name order, a page at a time, each page one request), then its
    subfolders (prefixes)."""
    bucket, prefix = folder_prefix(folder)
    token, subfolders = None, set()
    while True:
        page = functools.partial(jsonapi.list_page, bucket, prefix, "/", token, None)
        names, prefixes, token = retried(page, folder)
        subfolders.update(prefixes)
        # The folder's own placeholder object (named `prefix`) is not in it.
        yield from ((name[len(prefix) :], False) for name in names if name != prefix)
        if not token:
            break
    for sub in sorted(subfolders):
        yield sub[len(prefix) :].rstrip("/"), True


def holds_objects(folder: str) -> bool:
    """Whether any object's name starts with a `gs://` folder's prefix (one listed, not all)."""
    bucket, prefix = folder_prefix(folder)

    def first() -> bool:
        return any(jsonapi.list_page(bucket, prefix, "", None, 1)[:2])

    return retried(first, folder)


def store_answers(path: str) -> bool:
    """After requests for `path` kept failing: whether the store answers a request naming the
    object in another way (a listing of its name, retried as any request), that is whether the
    object fails rather than the service. Any answer counts, a refusal too. Another store's
    objects are not asked about: their failure is the service's."""
    if not is_gcs(path):
        return False
    bucket, name = split(path)

    def list_name() -> None:
        jsonapi.list_page(bucket, name, "", None, 1)

    try:
        retried(list_name, f"the listing of {path}")
    except StoreUnavailableError:
        return False
    except Exception:  # noqa: BLE001 - an answer, if a refusal: the service is up
        return True
    return True
