"""Parquet manifests: a schema instead of a header, row groups instead of lines.

The launcher reads only the footer (schema, row count). A piece [start, end) of the file owns
the row groups whose first page begins in it (Beam's own Parquet source draws the same line), so
pieces that tile a file read each row group once; a row is known by its index in the file, which
the footer gives for a row group's first row. Only the columns a row can use are read, a batch
at a time, and values come typed as Parquet stores them (an integer label stays an integer, a
null is None), which the same rules as a JSONL line's then judge (transforms/manifest/fields.py).
pyarrow, a dependency of Beam, is imported only when a Parquet manifest is read.
"""

from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

from tfrecord_pipeline.transforms.errors import Reason, RowError, UserError
from tfrecord_pipeline.transforms.manifest.embedded import Embedded, checked_schema
from tfrecord_pipeline.transforms.manifest.fields import IMAGE_ALIAS, IMAGE_COLUMN
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig
from tfrecord_pipeline.transforms.storage import fileio, retry

ROWS_PER_READ = 1024  # rows decoded into Python at once
BUFFER_BYTES = 1 << 20  # pages are read through a buffer of this size, not column chunks whole


class Footer(NamedTuple):
    columns: tuple[str, ...]  # every top-level column of the schema
    rows: int
    schema: object = None  # pyarrow.Schema


def read_footer(stream: BinaryIO, path: str) -> Footer:
    """The schema's columns and the row count; a file that is not Parquet is a UserError."""
    import pyarrow

    try:
        metadata = _open(stream).metadata
    except (pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError) as error:
        raise UserError(f"{path}: not a readable Parquet file ({error})") from None
    schema = metadata.schema.to_arrow_schema()
    return Footer(tuple(schema.names), metadata.num_rows, schema)


def usable_columns(
    stream: BinaryIO, path: str, config: ReadConfig
) -> tuple[tuple[str, ...], int, Embedded | None]:
    """The columns a row can use, the row count and where the file holds its images (if it
    does: transforms/manifest/embedded.py), from the footer alone; a schema without a required
    column is a UserError."""
    footer = read_footer(stream, path)
    found = checked_schema(footer.schema, path, config)
    columns = wanted_columns(footer.columns, config) + ((found.column,) if found else ())
    return columns, footer.rows, found


def wanted_columns(columns: tuple[str, ...], config: ReadConfig) -> tuple[str, ...]:
    """The schema's columns a row can use, in schema order: the others are never read."""
    wanted = {IMAGE_COLUMN, IMAGE_ALIAS, "label", "key", "split"}
    wanted.update(column for column, _ in config.features)
    return tuple(column for column in columns if column in wanted)


def _open(stream: BinaryIO):
    import pyarrow.parquet as pq

    return pq.ParquetFile(stream, buffer_size=BUFFER_BYTES)


def _group_start(group) -> int:
    """The byte offset of a row group's first page (its first column's dictionary page when
    it has one), as apache_beam.io.parquetio takes it."""
    column = group.column(0)
    return column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset


def piece_records(
    stream: BinaryIO, start: int, end: int, columns: tuple[str, ...], rows: int = ROWS_PER_READ
) -> Iterator[tuple[int, int, dict | RowError]]:
    """(row group offset, row index, fields) of every row of the row groups that begin in
    [start, end), `rows` decoded at a time. A row group that cannot be decoded (corrupt pages)
    is one RowError at its first row, after any rows of it already read."""
    import pyarrow

    reader = _open(stream)
    metadata, first_row = reader.metadata, 0
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        offset = _group_start(group)
        if start <= offset < end:
            row = first_row
            batches = reader.iter_batches(rows, row_groups=[index], columns=list(columns))
            try:
                for batch in batches:
                    for fields in batch.to_pylist():
                        yield offset, row, fields
                        row += 1
            except (pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError, OSError) as error:
                if isinstance(error, fileio.UNAVAILABLE) or retry.is_transient(error):
                    raise  # the store's failure, not the file's: the attempt fails, is retried
                message = f"row group {index} cannot be read: {' '.join(str(error).split())}"
                yield offset, first_row, RowError(Reason.BAD_ROW, message)
        first_row += group.num_rows
