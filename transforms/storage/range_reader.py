"""An object read as a seekable stream (`RangeReader`): manifests of gigabytes and archives,
never downloaded whole, each read on as one request where it is read in order."""

import io

from tfrecord_pipeline.transforms.storage import connection as connections
from tfrecord_pipeline.transforms.storage import jsonapi
from tfrecord_pipeline.transforms.storage.gcs import stat
from tfrecord_pipeline.transforms.storage.retry import CorruptTransferError, retried


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
