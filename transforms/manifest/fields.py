"""A manifest record's fields as a `ManifestRow`, checked, or as an `ErrorRow` saying why not.

Every record passes here, whatever its file (a CSV or JSONL line, a Parquet row, a COCO image,
a file in a class-folder tree), so every reader gets the same rules. The split is decided here
because it needs nothing but the row. The key of a row is its `key` column, else its image path
as written in the manifest (relative paths stay relative, so moving a dataset does not move rows
between splits), else, in a folder tree, the path under the root.
"""

import functools
import sys
from collections.abc import Iterable

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, RowError, UserError, shown
from tfrecord_pipeline.transforms.image.detection import row_annotations
from tfrecord_pipeline.transforms.manifest.labels import check_label
from tfrecord_pipeline.transforms.manifest.rows import (
    DroppedNegative,
    ManifestRow,
    ReadConfig,
    record_source,
    row_position,
)
from tfrecord_pipeline.transforms.manifest.splits import assign_split
from tfrecord_pipeline.transforms.storage import fileio

IMAGE_COLUMN, IMAGE_ALIAS = "image_uri", "url"  # `url`, as web-scale image sets name it
NOT_DETECTION = (
    "objects in a classification dataset (the first row of a JSONL manifest of a detection "
    "dataset lists objects)"
)


def _typed(value: object, kind: str, column: str) -> object:
    try:
        if kind == "int64":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            number = int(value)
            if not -(1 << 63) <= number < 1 << 63:  # Int64List cannot hold it
                raise ValueError
            return number
        if kind == "float":
            return float(value)
        return value if isinstance(value, bytes) else str(value).encode("utf-8")
    except (TypeError, ValueError):
        raise RowError(Reason.BAD_FEATURE, f"{column}={shown(value)} is not {kind}") from None


def make_row(
    fields: dict,
    folder: str,
    source_path: str,
    position: int,
    config: ReadConfig,
    objects: tuple | None = None,
) -> ManifestRow:
    """Validate one manifest record and turn it into a row; raises RowError. `folder` is the
    manifest's, with a trailing separator: relative image paths are under it (or under
    --image_root). A detection row's objects are parsed from its `objects`, unless given
    (a COCO file's). (Every row of every run passes here, a refresh's unchanged ones too: it
    is kept to plain comparisons.)"""
    get = fields.get
    image = get(IMAGE_COLUMN)
    if image is None:
        image = get(IMAGE_ALIAS)
    if config.detection:
        if objects is None:
            objects = row_annotations(fields, _label, config.masks)
        label = ""  # a detection row's labels are its objects'
    elif "objects" in fields:
        raise RowError(Reason.BAD_ANNOTATION, NOT_DETECTION)
    else:
        label = get("label")
    if image is None or label is None or not (image := str(image).strip()):
        raise RowError(Reason.BAD_ROW, "image_uri and label are required")
    if not config.detection:
        label = _row_label(label, config)
    split = get("split") or ""
    if type(split) is not str:
        raise RowError(Reason.BAD_SPLIT, f"split must be text, not {shown(split)}")
    if "\x00" in image:  # no file system takes it; os calls would raise ValueError
        raise RowError(Reason.BAD_ROW, "image_uri contains a NUL character")
    key = get("key")
    key = key and str(key).strip() or image
    features = ()
    if config.features:
        features = tuple(_feature(fields, column, kind) for column, kind in config.features)
    return ManifestRow(
        key,
        image,
        label,
        assign_split(key, split, config.split_spec),
        features,
        source_path,
        position,
        "" if fileio.is_absolute(image) else config.image_root or folder,
        objects,
    )


def _row_label(label: object, config: ReadConfig) -> str | tuple[str, ...]:
    """A classification row's label, checked: one, or with --multi_label a tuple."""
    if config.label_separator is not None:
        return _labels(label, config.label_separator)
    if type(label) is not str and (isinstance(label, bool) or not isinstance(label, int)):
        several = "; several labels an image: --multi_label" if isinstance(label, list) else ""
        message = f"label must be text or an integer, not {shown(label)}{several}"
        raise RowError(Reason.BAD_LABEL, message)
    return _label(label if type(label) is str else str(label))


@functools.lru_cache(maxsize=4096)
def _label(text: str) -> str:
    """A checked label, one string per label however many rows carry it (rows are held in
    memory until written); labels repeat, so each is checked once."""
    return sys.intern(check_label(text))


def _labels(value: object, separator: str) -> tuple[str, ...]:
    """A multi-label row's labels, sorted and each once: a list of texts and integers (empty:
    an image with none of the labels), or a text split at `separator`, or one integer."""
    if isinstance(value, str):
        parts = [part for part in value.split(separator) if part.strip()]
        if not parts:
            raise RowError(Reason.BAD_LABEL, "empty label")
    elif isinstance(value, int) and not isinstance(value, bool):
        parts = [value]
    elif isinstance(value, list | tuple):
        parts = value
    else:
        raise RowError(Reason.BAD_LABEL, f"labels must be a list or a text, not {shown(value)}")
    labels = set()
    for part in parts:
        if type(part) is not str and (isinstance(part, bool) or not isinstance(part, int)):
            message = f"a label must be text or an integer, not {shown(part)}"
            raise RowError(Reason.BAD_LABEL, message)
        labels.add(_label(part if type(part) is str else str(part)))
    return tuple(sorted(labels))


def _feature(fields: dict, column: str, kind: str) -> tuple[str, object]:
    if fields.get(column) in (None, ""):
        raise RowError(Reason.BAD_FEATURE, f"{column} is empty")
    return column, _typed(fields[column], kind, column)


def required_columns(config: ReadConfig) -> tuple[str, ...]:
    """The columns a CSV header or Parquet schema must have (image_uri or url, then these)."""
    return ("label", *(column for column, _ in config.features))


def check_columns(path: str, columns: Iterable[str], config: ReadConfig) -> None:
    """A manifest whose header or schema lacks a required column cannot give one row."""
    columns = list(columns)
    missing = [column for column in required_columns(config) if column not in columns]
    if IMAGE_COLUMN not in columns and IMAGE_ALIAS not in columns:
        missing.insert(0, IMAGE_COLUMN)
    if missing:
        said = f"{path}: missing column(s) {', '.join(missing)}; header is {columns}"
        raise UserError(said + _header_hint(missing, columns))


def _header_hint(missing: list[str], columns: list[str]) -> str:
    """What a header that misses columns likely got wrong: another separator than the comma
    (a spreadsheet's export in some locales), or a name's case or spaces."""
    if len(columns) == 1 and (separator := next((c for c in ";\t|" if c in columns[0]), None)):
        return f": columns are separated by commas, not {separator!r}"
    near = [
        f"{given!r} is not {want!r}"
        for want in missing
        for given in columns
        if given.strip().lower() == want
    ]
    return f": column names are exact, {', '.join(near)}" if near else ""


def record_row(
    fields: dict | RowError,
    offset: int | None,
    folder: str,
    path: str,
    number: int,
    config: ReadConfig,
    objects: tuple | RowError | None = None,
) -> ManifestRow | ErrorRow | DroppedNegative:
    """The row of one parsed record at `offset` (see `row_position`) of manifest number
    `number` (or its RowError, as the parser found it), or an ErrorRow of what it said; with
    --drop_negatives, a detection row without objects is a DroppedNegative. `objects`: a COCO
    image's, parsed already (or why they cannot be)."""
    try:
        for error in (fields, objects):
            if isinstance(error, RowError):
                raise error
        row = make_row(fields, folder, path, row_position(number, offset), config, objects)
        if config.drop_negatives and row.objects == ():
            return DroppedNegative(row.source)
        return row
    except RowError as error:
        source = path if offset is None else record_source(path, offset)
        raw = fields if isinstance(fields, dict) else {}
        key = str(raw.get("key") or raw.get(IMAGE_COLUMN) or raw.get(IMAGE_ALIAS) or source)
        row = tuple((str(k), str(v)) for k, v in raw.items())
        return ErrorRow(key, source, error.reason, error.message, row)
