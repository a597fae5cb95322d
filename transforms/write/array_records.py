"""ArrayRecord shards (`--file_format array_record`): the same serialized Examples as a TFRecord
shard, in the same order, in the container Grain and TFDS's `as_data_source()` read by index.

Written with `group_size:1`, as TFDS writes them: a chunk a record, so any record is read alone.
Its chunks are not compressed, as TFRecord shards are not unless asked: stored images are JPEG
or PNG already, which array_record's default (zstd level 3) shrank by 0.1% on the benchmark's
corpus for several times the writer's time.
The writer's bytes are a function of the records alone (no timestamp, no host; one thread), so
a shard written whole and one assembled from its pieces' records are the same file.

array_record is imported on first use: only an ArrayRecord shard needs it. Its writer and
reader take local paths only. On an object store a shard is written into a temporary file on
this machine's disk and uploaded as it is closed, and a shard read is downloaded into one; so a
writer needs the disk of the one shard it writes (docs/output.md).
"""

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

import google_crc32c

from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.tfrecord.records import RecordError, file_crc32c

SUFFIX = ".array_record"
WRITER_OPTIONS = "group_size:1,uncompressed"
COPY_CHUNK_BYTES = 8 << 20
READ_BATCH = 256  # records read at once: memory holds a batch, never the shard


def _module():
    from array_record.python import array_record_module

    return array_record_module


class ArrayRecordShardWriter:
    """Writes records into the ArrayRecord file `path` (local or on an object store), with
    the count, size and CRC-32C of the file as stored once it is closed."""

    def __init__(self, path: str):
        self._path = path
        self._folder = tempfile.mkdtemp(prefix="array-record-") if fileio.is_remote(path) else ""
        self._local = os.path.join(self._folder, "shard") if self._folder else path
        if not self._folder:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._writer = _module().ArrayRecordWriter(self._local, WRITER_OPTIONS)
        self.records, self.bytes, self._crc = 0, 0, 0
        if not self._writer.ok():
            self._discard()
            raise OSError(f"cannot write an ArrayRecord file at {self._local}")

    def write(self, record: bytes) -> None:
        with _as_os_error(self._local):
            self._writer.write(record)
        self.records += 1

    def close(self) -> None:
        """Finish the file (its footer), then, on an object store, upload it; the temporary
        file is deleted however that ends."""
        try:
            with _as_os_error(self._local):
                self._writer.close()
            self._copy_out()
        finally:
            self._discard()

    def _copy_out(self) -> None:
        """The file's size and CRC-32C, read back once; uploaded on the way when remote."""
        with contextlib.ExitStack() as stack:
            source = stack.enter_context(open(self._local, "rb"))
            upload = stack.enter_context(fileio.create(self._path)) if self._folder else None
            while chunk := source.read(COPY_CHUNK_BYTES):
                self._crc = google_crc32c.extend(self._crc, chunk)
                self.bytes += len(chunk)
                if upload is not None:
                    upload.write(chunk)

    def _discard(self) -> None:
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)

    @property
    def crc32c(self) -> str:
        return file_crc32c(self._crc)


@contextlib.contextmanager
def _as_os_error(path: str):
    """The writer's failures, which it raises as RuntimeError with the system's words in its
    message, as the OSError they are (a full disk: ENOSPC, which the command line tells; one
    it does not name: EIO, the device failing)."""
    try:
        yield
    except RuntimeError as error:
        message = str(error)
        code = next((code for code, text in _ERRNO_TEXTS if text in message), errno.EIO)
        raise OSError(code, message, path) from None


_ERRNO_TEXTS = tuple(
    (code, os.strerror(code)) for code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES)
)


def array_records_in(source: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """(index, record) for every record of an ArrayRecord file read from the binary stream
    `source`: copied into a temporary file first (the reader takes local paths only), in
    chunks, so disk holds the file and memory a batch of records, never the file. `source` is
    read to its end and left open (the caller's to close); RecordError when it does not hold a
    whole ArrayRecord file."""
    with tempfile.NamedTemporaryFile(prefix="array-record-") as copy:
        shutil.copyfileobj(source, copy, COPY_CHUNK_BYTES)
        copy.flush()
        yield from read_array_record_file(copy.name)


def read_array_record_path(path: str) -> Iterator[tuple[int, bytes]]:
    """(index, record) for every record of the ArrayRecord file `path`, local or on an object
    store (`array_records_in` its stream): memory holds a batch of records, never the file
    (`load()` reads shards so)."""
    if not fileio.is_remote(path):
        yield from read_array_record_file(path)
        return
    with fileio.open_bytes(path, COPY_CHUNK_BYTES) as source:
        yield from array_records_in(source)


def read_array_record_file(path: str) -> Iterator[tuple[int, bytes]]:
    """(index, record) for every record of the local ArrayRecord file `path`."""
    if not os.path.isfile(path):  # the reader would take it for a damaged file
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    reader = _module().ArrayRecordReader(path)
    try:
        if not reader.ok():  # it says no more: a truncated file, or not an ArrayRecord one
            raise RecordError("not a valid ArrayRecord file")
        count = reader.num_records()
        for start in range(0, count, READ_BATCH):
            try:
                batch = reader.read(start, min(count, start + READ_BATCH))
            except RuntimeError as error:  # a chunk's hash mismatch, say
                raise RecordError(f"record {start} and after cannot be read ({error})") from None
            yield from enumerate(batch, start=start)
    finally:
        with contextlib.suppress(RuntimeError):  # a reader that failed fails its close too
            reader.close()
