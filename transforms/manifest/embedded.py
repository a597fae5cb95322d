"""Manifests that hold their images: a Parquet or Arrow file as Hugging Face `datasets` writes
one (`to_parquet`, `save_to_disk`), or any with an `image` column of bytes.

The image column is the one the schema's `huggingface` metadata calls an `Image` feature (a
struct of `bytes` and `path`), else an `image` column of bytes or of that struct; a manifest
with an `image_uri` or `url` column names its images instead, as before. A `ClassLabel` label
column is integers with names in that metadata: a row's label is its name, and the names keep
their ids (`LabelSource.declared`: id = position in the names + --label_offset), so
`labels.txt` lists them at the ids the dataset gave them.

A file read in order has no byte range an image could be read from, so each image's bytes are
appended to a staged file as the rows are read (transforms/archive/unpack.py); the row points
into it, known again by its bytes' size and CRC-32. Its image is `<manifest>#<row index>`,
which is also its key (unless a `key` column gives one).
"""

import contextlib
import json
import posixpath
import zlib
from typing import NamedTuple

from tfrecord_pipeline.transforms.archive.unpack import Unpacked
from tfrecord_pipeline.transforms.errors import Reason, RowError, UserError
from tfrecord_pipeline.transforms.manifest.fields import (
    IMAGE_ALIAS,
    IMAGE_COLUMN,
    check_columns,
    record_row,
)
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig

HF_METADATA = b"huggingface"  # the schema metadata key `datasets` writes its features under
IMAGE_NAME = "image"
ROWS_PER_READ = 64  # rows of image bytes decoded into Python at once


class Embedded(NamedTuple):
    """Where a manifest holds its images, and its label names (a ClassLabel's, in id order)."""

    column: str
    names: tuple[str, ...] = ()


def embedded_images(schema) -> Embedded | None:
    """The column of image bytes of an Arrow schema, or None for a manifest naming its images."""
    if IMAGE_COLUMN in schema.names or IMAGE_ALIAS in schema.names:
        return None
    features = _features(schema.metadata or {})
    declared = (n for n, f in features.items() if f.get("_type") == "Image" and n in schema.names)
    column = next(declared, None)
    if column is None and IMAGE_NAME in schema.names and _holds_bytes(schema.field(IMAGE_NAME)):
        column = IMAGE_NAME
    if column is None:
        return None
    label = features.get("label", {})
    names = label.get("names") if label.get("_type") == "ClassLabel" else None
    return Embedded(column, tuple(map(str, names)) if isinstance(names, list) else ())


def checked_schema(schema, path: str, config: ReadConfig) -> Embedded | None:
    """Where a manifest of this schema holds its images (None: it names them); a schema
    without a column a row needs is a UserError."""
    found = embedded_images(schema)
    names = tuple(schema.names)
    check_columns(path, (*names, IMAGE_COLUMN) if found else names, config)
    return found


def _features(metadata: dict) -> dict:
    """The features `datasets` recorded in the schema; none when it did not, or not readably."""
    try:
        features = json.loads(metadata[HF_METADATA])["info"]["features"]
    except (KeyError, TypeError, ValueError):
        return {}
    if not isinstance(features, dict):
        return {}
    return {name: feature for name, feature in features.items() if isinstance(feature, dict)}


def _holds_bytes(field) -> bool:
    import pyarrow

    kind = field.type
    if pyarrow.types.is_struct(kind):
        return kind.get_field_index("bytes") >= 0
    return pyarrow.types.is_binary(kind) or pyarrow.types.is_large_binary(kind)


def declared_names(manifests) -> tuple[str, ...]:
    """The label names the manifests declare (ClassLabel's), one list for all; UserError when
    two declare different ones (one id, one name)."""
    declared = {m.embedded.names: m.path for m in manifests if m.embedded and m.embedded.names}
    if len(declared) > 1:
        paths = list(declared.values())
        raise UserError(f"{paths[0]} and {paths[1]} name their ClassLabel ids differently")
    return next(iter(declared), ())


def row_fields(fields: dict, index: int, name: str, found: Embedded, unpacked: Unpacked):
    """A row's fields with its image as `<name>#<index>` (its bytes unpacked: the Member) or
    the path the dataset gives, and its ClassLabel id as its name; or a RowError."""
    value = fields.pop(found.column, None)
    data, path = value, None
    if isinstance(value, dict):  # an Image feature: {bytes, path}
        data, path = value.get("bytes"), value.get("path")
    member = None
    if data is not None:
        fields[IMAGE_COLUMN] = f"{name}#{index}"
        member = unpacked.add(data, f"{len(data)}:{zlib.crc32(data):08x}")
    elif path:
        fields[IMAGE_COLUMN] = path  # an image the dataset names, not holds
    label = fields.get("label")
    if found.names and type(label) is int:
        if not 0 <= label < len(found.names):
            count = len(found.names)
            message = f"label {label} is no ClassLabel id (0 to {count - 1}; -1: unlabelled)"
            return RowError(Reason.BAD_LABEL, message), None
        fields["label"] = found.names[label]
    return fields, member


@contextlib.contextmanager
def unpacking(path: str, number: int, found: Embedded | None, config: ReadConfig, start: int):
    """A function making the row of a record (fields, index, folder) of manifest `path`:
    its images unpacked, when it holds them, into a staged file of this piece's own."""
    if found is None:
        yield lambda fields, index, folder: record_row(fields, index, folder, path, number, config)
        return
    name = posixpath.basename(path)
    with Unpacked(config.unpack_to, f"{path}@{start}", config.max_file_bytes) as unpacked:

        def to_row(fields, index: int, folder: str):
            member = None
            if isinstance(fields, dict):
                fields, member = row_fields(fields, index, name, found, unpacked)
            row = record_row(fields, index, folder, path, number, config)
            return row._replace(member=member) if member and isinstance(row, ManifestRow) else row

        yield to_row
