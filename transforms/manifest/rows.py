"""Manifest rows: the rules that turn one record (a CSV or JSONL line, a Parquet row, a file in
a class-folder tree) into a `ManifestRow`, or an `ErrorRow` when it cannot be used.

The split is decided here because it needs nothing but the row. The key of a row is its `key`
column, else its image path as written in the manifest (relative paths stay relative, so moving a
dataset does not move rows between splits), else, in a folder tree, the path under the root. A
record is known by where it is in its file, a byte offset or a row index, which whoever reads
any piece of the file knows without reading the rest (transforms/manifest/pieces.py).
"""

import csv
import functools
import json
import re
import sys
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from transforms.errors import ErrorRow, Reason, RowError, UserError, shown
from transforms.image.detection import row_annotations
from transforms.manifest.labels import check_label
from transforms.manifest.pieces import BOM, MAX_LINE_BYTES
from transforms.manifest.splits import SplitSpec, assign_split
from transforms.storage import fileio

IMAGE_COLUMN, IMAGE_ALIAS = "image_uri", "url"  # `url`, as web-scale image sets name it
FEATURE_TYPES = ("int64", "float", "bytes")
PARQUET_SUFFIX = ".parquet"
# A usable JSONL row is one object of scalars (depth 1); much deeper nesting is only ever an
# attack on the parser, which recurses once per level.
MAX_JSON_DEPTH = 16
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"')
# A \uD800-\uDFFF escape: half of a pair (an emoji) or, alone, a surrogate no UTF-8 text holds;
# looked for in a JSONL line's text and in a COCO document's bytes.
_SURROGATE_ESCAPE = {
    str: re.compile(r"\\u[dD][89a-fA-F]"),
    bytes: re.compile(rb"\\u[dD][89a-fA-F]"),
}
_JSON_BRACKET = re.compile(r"[\[\]{}]")
_CSV_FIELD_LIMIT = csv.field_size_limit()  # longer fields are the csv module's to refuse
NOT_DETECTION = (
    "objects in a classification dataset (the first row of a JSONL manifest of a detection "
    "dataset lists objects)"
)
LONG_LINE = f"a line over {MAX_LINE_BYTES:,} bytes"
QUOTED_NEWLINE = "a quoted field runs past the end of its line (a CSV record is one line)"


class ReadConfig(NamedTuple):
    """What the readers need from the options (kept small: it is pickled to workers)."""

    split_spec: SplitSpec | None = None
    features: tuple[tuple[str, str], ...] = ()  # (column, type) for --feature
    label_separator: str | None = None  # with --multi_label: a row's label is a tuple
    image_root: str = ""  # --image_root with a trailing separator: relative images are under it
    detection: bool = False  # rows list objects (transforms/image/detection.py), not one label
    drop_negatives: bool = False  # a detection row with no objects is counted, not converted
    masks: bool = False  # a detection row's objects keep their masks (transforms/image/masks.py)


class ManifestRow(NamedTuple):
    """One image to convert. Every row is held in memory until its shard is written, so rows
    share what they can: one label string per label, one manifest path and one folder per
    manifest, the image path as written (also the key, unless the manifest gives one), and
    `image_uri` and `source` derived from them (about 240 bytes a row instead of 510)."""

    key: str
    image: str  # as the manifest gives it: relative to its folder, absolute, or a scheme URI
    label: str | tuple[str, ...]  # with --multi_label, the image's labels (sorted, distinct)
    split: str
    features: tuple[tuple[str, object], ...]  # (name, typed value) in --feature order
    manifest: str  # the manifest's path; in a class-folder tree the image path (image itself)
    position: int  # row_position(manifest number, offset): "first" among duplicate keys
    folder: str = ""  # the manifest's folder and a separator, for a relative `image`; else ""
    objects: tuple | None = None  # a detection row's annotated objects; None when classifying

    @property
    def image_uri(self) -> str:
        """The image's absolute local path or scheme URI."""
        return self.folder + self.image

    @property
    def source(self) -> str:
        """Where the row came from, for error reports (see `record_source`); in a class-folder
        tree, the image path."""
        stored = self.position & _OFFSET_MASK
        return record_source(self.manifest, stored - 1) if stored else self.image_uri


def row_labels(row: ManifestRow) -> tuple[str, ...]:
    """Every label a row carries, which the label map must give an id: its label, its labels
    (--multi_label), or its objects' labels."""
    if row.objects is not None:
        return tuple(obj.label for obj in row.objects)
    return (row.label,) if type(row.label) is str else row.label


_OFFSET_BITS = 48  # a byte offset in a manifest of up to 256 TB
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1


def row_position(manifest_number: int, offset: int | None) -> int:
    """One int that sorts rows as the manifests list them: by manifest, then by where in it.
    `offset`: the record's byte offset (CSV, JSONL) or row index (Parquet); None for a row of
    a class-folder tree, which has no place in a file (stored as 0, an offset as offset + 1)."""
    return manifest_number << _OFFSET_BITS | (0 if offset is None else offset + 1)


COCO_IMAGES = "#images"  # what a COCO file's rows add to its path: their offset is an index


def manifest_number(row: ManifestRow) -> int:
    """The place among --manifest of the manifest a row came from (see row_position)."""
    return row.position >> _OFFSET_BITS


def record_source(manifest: str, offset: int) -> str:
    """Where a record is, for error reports: `<manifest>@<byte offset>` for a CSV or JSONL line
    (`tail -c +<offset + 1> <manifest> | head -n 1` prints it), `<manifest>#<row index>` for a
    Parquet row, `<file>#images[<index>]` for an image of a COCO file, all counted from 0."""
    if manifest.endswith(COCO_IMAGES):
        return f"{manifest}[{offset}]"
    mark = "#" if manifest.lower().endswith(PARQUET_SUFFIX) else "@"
    return f"{manifest}{mark}{offset}"


class RowBatch(NamedTuple):
    """Manifest rows that travel between pipeline steps together.

    Beam's cost is per element (coding, bookkeeping, a pickle call for a row type it does not
    know), so rows move in batches: one element, one pickle, for hundreds of rows.
    """

    rows: tuple[ManifestRow, ...]


class SkippedFile(NamedTuple):
    """A non-image file, or a folder deeper than any image can be, met in a class-folder tree:
    counted, not converted."""

    path: str


class DroppedNegative(NamedTuple):
    """With --drop_negatives, a detection row listing no objects: counted, not converted (so
    rows in = records out + error rows still holds: it is not a row in)."""

    source: str


def manifest_kind(path: str) -> str:
    if fileio.is_dir(path):
        return "tree"
    lower = path.lower()
    if lower.endswith(".csv"):
        return "csv"
    if lower.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if lower.endswith(PARQUET_SUFFIX):
        return "parquet"
    raise UserError(
        f"{path}: a manifest must be .csv, .jsonl, .parquet or a class-folder directory"
    )


def error_row(row: ManifestRow, reason: Reason, message: str) -> ErrorRow:
    """A parsed row rejected later (by its label, its image, its key), with its fields."""
    label = row.label if type(row.label) is str else json.dumps(row.label, ensure_ascii=False)
    fields = (("image_uri", row.image_uri), ("label", label), ("split", row.split))
    return ErrorRow(row.key, row.source, reason, message, fields, row.split)


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
    manifest: str,
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
        manifest,
        position,
        "" if fileio.is_absolute(image) else config.image_root or folder,
        objects,
    )


def _row_label(label: object, config: ReadConfig) -> str | tuple[str, ...]:
    """A classification row's label, checked: one, or with --multi_label a tuple."""
    if config.label_separator is not None:
        return _labels(label, config.label_separator)
    if type(label) is not str and (isinstance(label, bool) or not isinstance(label, int)):
        raise RowError(Reason.BAD_LABEL, f"label must be text or an integer, not {shown(label)}")
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
        raise UserError(f"{path}: missing column(s) {', '.join(missing)}; header is {columns}")


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


def decoded(line: bytes | None) -> str:
    """A manifest line as text; a line too long to hold, or not UTF-8, is a bad row."""
    if line is None:
        raise RowError(Reason.BAD_ROW, LONG_LINE)
    try:
        return line.decode()
    except UnicodeDecodeError as error:
        raise RowError(Reason.BAD_ROW, not_utf8(error)) from None


def not_utf8(error: UnicodeDecodeError) -> str:
    return f"not UTF-8 text (bytes {error.object[error.start : error.end].hex(' ')})"


def csv_cells(line: str) -> list[str]:
    """The cells of one CSV line (given without its newline), as the csv module reads them: []
    for a blank line. A record is one line, so a piece of a file can start at any line: a
    quoted field that runs past the end of its line (a newline inside quotes) makes the line a
    bad row."""
    try:
        cells = next(csv.reader((line + "\n",)), [])
    except csv.Error as error:  # e.g. a field over the csv module's size limit
        raise RowError(Reason.BAD_ROW, f"unparseable CSV: {error}") from None
    if cells and "\n" in cells[-1]:  # the line's own newline, swallowed by an open quote
        raise RowError(Reason.BAD_ROW, QUOTED_NEWLINE)
    return cells


def csv_fields(line: str, columns: tuple[str, ...]) -> dict | None:
    """The fields of one CSV line under its file's header; None for a blank line. Missing
    trailing cells read as None, as csv.DictReader gives them. A line without quotes or a
    carriage return before its end (nearly every line) is split on its commas: what the csv
    module makes of it, at a fifth of the cost."""
    body = line[:-1] if line.endswith("\r") else line
    if '"' not in body and "\r" not in body and len(body) <= _CSV_FIELD_LIMIT:
        cells = body.split(",") if body else []
    else:
        cells = csv_cells(line)
    if len(cells) == len(columns):
        return dict(zip(columns, cells, strict=True))
    if not cells:
        return None
    if len(cells) > len(columns):
        raise RowError(Reason.BAD_ROW, "more cells than columns")
    return dict(zip(columns, cells + [None] * (len(columns) - len(cells)), strict=True))


def nests_too_deep(body: str) -> bool:
    """Whether a JSON text nests deeper than MAX_JSON_DEPTH, found without parsing it (brackets
    inside strings do not count). A plain row has too few brackets to need the scan."""
    if body.count("[") + body.count("{") <= MAX_JSON_DEPTH:
        return False
    depth = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", body)):
        depth += 1 if bracket in "[{" else -1
        if depth > MAX_JSON_DEPTH:
            return True
    return False


def jsonl_fields(line: str, columns: tuple[str, ...] = ()) -> dict | None:
    """The fields of one JSONL line; None for a blank line."""
    if not line.strip():
        return None
    if nests_too_deep(line):
        raise RowError(Reason.BAD_ROW, f"JSON nested deeper than {MAX_JSON_DEPTH}")
    try:
        fields = json.loads(line)
    except ValueError as error:
        raise RowError(Reason.BAD_ROW, f"not JSON: {error}") from None
    if not isinstance(fields, dict):
        raise RowError(Reason.BAD_ROW, "a JSONL line must be an object")
    check_unicode(line, fields)
    return fields


def check_unicode(text: str | bytes, parsed: object) -> None:
    """Raises RowError when a string JSON `text` parsed into holds half a surrogate pair: JSON
    lets `\\ud800` stand alone, and no path, key or label can hold it (UTF-8 has no surrogates)
    to be opened, hashed or written. Only text with such an escape is looked at twice."""
    if not _SURROGATE_ESCAPE[type(text)].search(text):
        return
    try:
        json.dumps(parsed, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise RowError(
            Reason.BAD_ROW, "a JSON string holds half a surrogate pair (\\uD800-\\uDFFF)"
        ) from None


def line_records(
    lines: Iterable[tuple[int, bytes | None]], kind: str, columns: tuple[str, ...]
) -> Iterator[tuple[int, dict | RowError]]:
    """(byte offset, fields or RowError) of each non-blank line of a CSV (under `columns`, its
    header) or JSONL manifest, from (byte offset, line) pairs."""
    parse = csv_fields if kind == "csv" else jsonl_fields
    for offset, line in lines:
        if offset == 0 and line:
            line = line.removeprefix(BOM)
        try:
            if line is None:
                raise RowError(Reason.BAD_ROW, LONG_LINE)
            fields = parse(line.decode(), columns)
        except UnicodeDecodeError as error:
            yield offset, RowError(Reason.BAD_ROW, not_utf8(error))
            continue
        except RowError as error:
            yield offset, error
            continue
        if fields is not None:
            yield offset, fields
