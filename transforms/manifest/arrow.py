"""Arrow IPC manifests: what Hugging Face `datasets.save_to_disk` writes (a folder of
`data-*-of-*.arrow` files in the IPC *stream* format, beside `state.json` naming them), or an
Arrow IPC file (`ARROW1`).

A stream has no footer to split it by, so an Arrow manifest is read whole, by one reader, a
record batch at a time (a batch is what the reader decodes at once; `datasets` writes images a
hundred or so rows a batch). Its columns are judged as a Parquet file's, and its images, when
it holds them, are unpacked as it is read (transforms/manifest/embedded.py). A row is known
by its index in the file.
"""

import json
from collections.abc import Iterator
from typing import BinaryIO

from tfrecord_pipeline.transforms.errors import Reason, RowError, UserError
from tfrecord_pipeline.transforms.manifest.embedded import (
    ROWS_PER_READ,
    Embedded,
    checked_schema,
    unpacking,
)
from tfrecord_pipeline.transforms.manifest.parquet import wanted_columns
from tfrecord_pipeline.transforms.manifest.pieces import READ_BYTES
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig
from tfrecord_pipeline.transforms.storage import fileio

ARROW_SUFFIX = ".arrow"
FILE_MAGIC = b"ARROW1"
SAVED_STATE = "state.json"  # save_to_disk's list of a dataset's files


def saved_dataset(folder: str) -> list[str]:
    """The Arrow files of a dataset `save_to_disk` wrote into `folder`, in its order; none
    when the folder is not one."""
    state = fileio.join(folder, SAVED_STATE)
    if not fileio.exists(state):
        return []
    try:
        files = json.loads(fileio.read_text(state))["_data_files"]
        return [fileio.join(folder, entry["filename"]) for entry in files]
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{state}: not a dataset's state.json (save_to_disk's)") from None


def _reader(stream: BinaryIO):
    """An IPC file's reader, or a stream's (read from its start)."""
    import pyarrow.ipc

    head = stream.read(len(FILE_MAGIC))
    stream.seek(0)
    if head == FILE_MAGIC:
        return pyarrow.ipc.open_file(stream)
    return pyarrow.ipc.open_stream(stream)


def usable_columns(
    stream: BinaryIO, path: str, config: ReadConfig
) -> tuple[tuple[str, ...], bool, Embedded | None]:
    """The columns a row can use, whether it may have rows, and where it holds images, from
    its schema alone; a file that is not Arrow, or lacks a required column, is a UserError."""
    import pyarrow

    try:
        schema = _reader(stream).schema
    except (pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError, OSError) as error:
        raise UserError(f"{path}: not a readable Arrow file ({error})") from None
    found = checked_schema(schema, path, config)
    columns = wanted_columns(tuple(schema.names), config) + ((found.column,) if found else ())
    return columns, True, found  # a stream's rows are counted as read


def read_arrow(manifest, config: ReadConfig) -> Iterator:
    """Every row and error row of an Arrow manifest (a sources.ManifestFile), read whole, in
    order."""
    folder = fileio.join(fileio.dirname(manifest.path), "")
    path, number = manifest.path, manifest.number
    with (
        fileio.open_bytes(path, READ_BYTES) as stream,
        unpacking(path, number, manifest.embedded, config, 0) as to_row,
    ):
        for index, fields in records(stream, manifest.columns):
            yield to_row(fields, index, folder)


def records(stream: BinaryIO, columns: tuple[str, ...]) -> Iterator[tuple[int, dict | RowError]]:
    """(row index, fields) of every row, ROWS_PER_READ at a time; a batch that cannot be read
    (a file cut short) is one RowError at the first row not read, and the end of the file."""
    import pyarrow

    index = 0
    try:
        reader = _reader(stream)
        for batch in _batches(reader):
            batch = batch.select(list(columns))
            for at in range(0, batch.num_rows, ROWS_PER_READ):
                for fields in batch.slice(at, ROWS_PER_READ).to_pylist():
                    yield index, fields
                    index += 1
    except (pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError, OSError) as error:
        if isinstance(error, fileio.UNAVAILABLE):
            raise
        message = f"cannot be read from row {index:,} on: {' '.join(str(error).split())}"
        yield index, RowError(Reason.BAD_ROW, message)


def _batches(reader):
    if hasattr(reader, "num_record_batches"):  # an IPC file: batches by number
        return (reader.get_batch(i) for i in range(reader.num_record_batches))
    return iter(reader)
