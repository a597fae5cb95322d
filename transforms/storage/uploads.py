"""Uploads to Cloud Storage's JSON API, on this thread's connection (answers.py): a small
object (a rows, index or errors file, metadata, a marker, the dataset's pointer) in one
multipart request, made only if its generation is the one given when a caller asks (0: only
if there is none); a shard as a resumable upload, sent in chunks through one session.

What the store made is checked: its answer's CRC-32C must be that of the bytes sent
(CorruptTransferError otherwise). Nothing here retries; each request is sent through
retry.py's `retried` by the caller (gcs.write) or by `ResumableUpload` itself, which after a
failed chunk asks the session how many bytes it holds and sends on from there: a cut costs a
chunk's part, never the shard.

The emulator the tests run against (gcp-storage-emulator) takes both kinds of upload and
answers a session's offset query, but ignores `ifGenerationMatch`: the fault proxy in front of
it (tests/fault_proxy.py) checks a conditional upload's precondition as Cloud Storage does.
"""

import json
import random
import urllib.parse
from typing import NamedTuple

import google_crc32c

from tfrecord_pipeline.transforms.storage import connection as connections
from tfrecord_pipeline.transforms.storage import jsonapi
from tfrecord_pipeline.transforms.storage.answers import json_answer, quoted, sent, split
from tfrecord_pipeline.transforms.storage.answers import with_query as _with_query
from tfrecord_pipeline.transforms.storage.retry import CorruptTransferError, retried
from tfrecord_pipeline.transforms.tfrecord.records import crc32c_of, file_crc32c

# Every chunk of a session but its last must be a multiple of 256 KiB; 8 MiB is the chunk
# Google's C++ client (pyarrow's, which sent shards before) buffers, and a request per 8 MiB
# keeps the requests' CPU a small part of a shard's.
CHUNK_BYTES = 8 << 20
_INCOMPLETE = frozenset({308})  # a session's answer while it waits for more bytes


class Uploaded(NamedTuple):
    generation: int
    crc32c: str  # base64, as Cloud Storage gives it


def upload(
    path: str, data: bytes, if_generation_match: int | None = None, content_type: str = ""
) -> Uploaded:
    """The object `gs://bucket/name` holding `data`, made with one multipart request; with
    `if_generation_match`, only if the object's generation is that (0: there is none), else
    PreconditionFailedError. Sent again after it took effect (its answer lost), an upload makes
    the same object, a conditional one is refused."""
    bucket, name = split(path)
    boundary = "=" * 15 + str(random.getrandbits(60)) + "=="
    metadata = json.dumps({"name": name}).encode()
    kind = (content_type or "application/octet-stream").encode()
    body = b"".join(
        (f"--{boundary}\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n".encode(),
         metadata,
         f"\r\n--{boundary}\r\ncontent-type: ".encode() + kind + b"\r\n\r\n",
         data,
         f"\r\n--{boundary}--".encode()),
    )  # fmt: skip
    target = _with_query(
        f"/upload/storage/v1/b/{quoted(bucket)}/o",
        uploadType="multipart",
        ifGenerationMatch=if_generation_match,
        fields="generation,crc32c",
    )
    headers = {"Content-Type": f'multipart/related; boundary="{boundary}"'}
    return _checked(json_answer(target, path, "POST", body, headers), path, crc32c_of(data))


def _checked(made: dict, path: str, crc32c: str) -> Uploaded:
    """What the store says it made, once its CRC-32C is that of the bytes sent."""
    if made.get("crc32c") != crc32c:
        raise CorruptTransferError(f"{path}: the object made does not match the bytes sent")
    return Uploaded(int(made["generation"]), crc32c)


class ResumableUpload:
    """A streamed upload of `gs://bucket/name` (a shard, an errors file), the object made when
    it is closed, however the writing ended (it is not yet the file's final name). Its bytes
    go out CHUNK_BYTES at a time through one resumable session, each chunk retried
    (`retried`): after a failure, the session's offset is asked first and the chunk sent on
    from there. An object that never filled a chunk is sent in one request (`upload`). A
    session gone (a week unused) raises FileNotFoundError, as for any object not found."""

    def __init__(self, path: str, chunk_bytes: int = CHUNK_BYTES):
        self._path, self._chunk_bytes = path, chunk_bytes
        self._buffer = bytearray()  # the bytes not yet held by the session
        self._held = 0  # bytes the session holds
        self._crc = 0  # CRC-32C of every byte written
        self._session: str | None = None  # the session's address, once the first chunk goes
        self._unsure = False  # a sending failed: the session's offset is asked before the next
        self._closed = False

    def write(self, data) -> int:
        self._buffer += data
        self._crc = google_crc32c.extend(self._crc, bytes(data))
        while len(self._buffer) >= self._chunk_bytes:
            retried(lambda: self._send(final=False), self._path)
        return len(data)

    def flush(self) -> None:
        """Nothing: a session takes whole chunks only (bytes go out as chunks fill)."""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._session is None:
            retried(lambda: upload(self._path, bytes(self._buffer)), self._path)
            return
        made = None
        while made is None:  # the session may hold less than the last PUT carried
            made = retried(lambda: self._send(final=True), self._path)
        _checked(made, self._path, file_crc32c(self._crc))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _send(self, final: bool) -> dict | None:
        """One PUT of the next chunk (of all that is left when `final`) from where the session
        is; the object's metadata once the session made it."""
        if self._session is None:
            self._session = self._start()
        if self._unsure:
            made = self._resume(final)
            if made is not None or (not final and len(self._buffer) < self._chunk_bytes):
                return made  # made already, or no whole chunk left to send
        self._unsure = True
        size = len(self._buffer) if final else self._chunk_bytes
        end = f"{self._held + size}" if final else "*"
        where = f"{self._held}-{self._held + size - 1}" if size else "*"
        headers = {"Content-Range": f"bytes {where}/{end}"}
        with memoryview(self._buffer) as view, view[:size] as chunk:
            response = self._put(headers, chunk)
        return self._answered(response)

    def _start(self) -> str:
        """A new session's address (its path and query: it is asked on this connection)."""
        bucket, name = split(self._path)
        target = f"/upload/storage/v1/b/{quoted(bucket)}/o?uploadType=resumable"
        headers = {"X-Upload-Content-Type": "application/octet-stream"}
        connection = connections.connection()
        response = sent(connection, "POST", target, self._path, headers, {"name": name})
        response.read()
        session = urllib.parse.urlsplit(response.getheader("Location", ""))
        return f"{session.path}?{session.query}"

    def _resume(self, final: bool) -> dict | None:
        """Asks the session what it holds (its bytes dropped from the buffer); the object's
        metadata if the session already made it (the last chunk's answer was lost). A session
        that made its object may be gone (the emulator forgets it at once): then the object is
        the one made if it holds what was written (its size and CRC-32C)."""
        try:
            return self._answered(self._put({"Content-Range": "bytes */*"}, b""))
        except FileNotFoundError:
            if not final:
                raise
            found = jsonapi.metadata(self._path)
            whole = (int(found["size"]), found["crc32c"])
            if whole != (self._held + len(self._buffer), file_crc32c(self._crc)):
                raise
            return found

    def _put(self, headers: dict, body):
        connection = connections.connection()
        response = sent(connection, "PUT", self._session, self._path, headers, body, _INCOMPLETE)
        data = response.read()
        self._unsure = False
        return response, data

    def _answered(self, answer) -> dict | None:
        """The object's metadata from a session's answer, or None while it waits for more
        bytes: those it holds (its Range) dropped from the buffer."""
        response, data = answer
        if response.status not in _INCOMPLETE:
            return json.loads(data)
        given = response.getheader("Range")  # "bytes=0-N"; none when it holds nothing
        held = int(given.rpartition("-")[2]) + 1 if given else 0
        del self._buffer[: held - self._held]
        self._held = held
        return None
