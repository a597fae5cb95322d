"""Manifest rows from CSV, JSONL and class-folder trees.

Each reader turns one source into `ManifestRow`s (or `ErrorRow`s for lines it cannot use); the
split is decided here because it needs nothing but the row. The key of a row is its `key` column,
else its image path as written in the manifest (relative paths stay relative, so moving a dataset
does not move rows between splits), else, in a folder tree, the path under the root.
"""

import collections
import csv
import functools
import glob as local_glob
import io
import json
import posixpath
import re
import sys
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from transforms import fileio
from transforms.errors import ErrorRow, Reason, RowError, UserError, shown
from transforms.labels import check_label
from transforms.splits import SplitSpec, assign_split

REQUIRED_COLUMNS = ("image_uri", "label")
IMAGE_EXTENSIONS = frozenset(
    [".jpg", ".jpeg", ".jpe", ".png", ".gif", ".bmp", ".tif", ".tiff", ".webp"]
)  # folder trees only; manifests are trusted to list images and checked by content
FEATURE_TYPES = ("int64", "float", "bytes")
TREE_DEPTH = 2  # folders listed below a tree's root: <split>/<label>/ holds the deepest images
# A usable JSONL row is one object of scalars (depth 1); much deeper nesting is only ever an
# attack on the parser, which recurses once per level.
MAX_JSON_DEPTH = 16
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


class ReadConfig(NamedTuple):
    """What the readers need from the options (kept small: it is pickled to workers)."""

    split_spec: SplitSpec | None = None
    features: tuple[tuple[str, str], ...] = ()  # (column, type) for --feature


class ManifestRow(NamedTuple):
    """One image to convert. Every row is held in memory until its shard is written, so rows
    share what they can: one label string per label, one manifest path and one folder per
    manifest, the image path as written (also the key, unless the manifest gives one), and
    `image_uri` and `source` derived from them (about 240 bytes a row instead of 510)."""

    key: str
    image: str  # as the manifest gives it: relative to its folder, absolute, or a scheme URI
    label: str
    split: str
    features: tuple[tuple[str, object], ...]  # (name, typed value) in --feature order
    manifest: str  # the manifest's path; in a class-folder tree the image path (image itself)
    position: int  # row_position(manifest number, line): "first" among duplicate keys
    folder: str = ""  # the manifest's folder and a separator, for a relative `image`; else ""

    @property
    def image_uri(self) -> str:
        """The image's absolute local path or scheme URI."""
        return self.folder + self.image

    @property
    def source(self) -> str:
        """Where the row came from, for error reports: `<manifest>:<line>`, or in a
        class-folder tree (line 0) the image path."""
        line = self.position & _LINE_MASK
        return f"{self.manifest}:{line}" if line else self.image_uri


_LINE_BITS = 32
_LINE_MASK = (1 << _LINE_BITS) - 1


def row_position(manifest_number: int, line: int) -> int:
    """One int that sorts rows as the manifests list them: by manifest, then by line."""
    return manifest_number << _LINE_BITS | line


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


def manifest_kind(path: str) -> str:
    if fileio.is_dir(path):
        return "tree"
    lower = path.lower()
    if lower.endswith(".csv"):
        return "csv"
    if lower.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    raise UserError(f"{path}: a manifest must be .csv, .jsonl or a class-folder directory")


def error_row(row: ManifestRow, reason: Reason, message: str) -> ErrorRow:
    """A parsed row rejected later (by its label, its image, its key), with its fields."""
    fields = (("image_uri", row.image_uri), ("label", row.label), ("split", row.split))
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
    fields: dict, folder: str, manifest: str, position: int, config: ReadConfig
) -> ManifestRow:
    """Validate one manifest record and turn it into a row; raises RowError. `folder` is the
    manifest's, with a trailing separator: relative image paths are under it. (Every row of
    every run passes here, a refresh's unchanged ones too: it is kept to plain comparisons.)"""
    get = fields.get
    image, label = get("image_uri"), get("label")
    if image is None or label is None or not (image := str(image).strip()):
        raise RowError(Reason.BAD_ROW, "image_uri and label are required")
    if type(label) is not str and (isinstance(label, bool) or not isinstance(label, int)):
        raise RowError(Reason.BAD_LABEL, f"label must be text or an integer, not {shown(label)}")
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
        _label(label if type(label) is str else str(label)),
        assign_split(key, split, config.split_spec),
        features,
        manifest,
        position,
        "" if fileio.is_absolute(image) else folder,
    )


@functools.lru_cache(maxsize=4096)
def _label(text: str) -> str:
    """A checked label, one string per label however many rows carry it (rows are held in
    memory until written); labels repeat, so each is checked once."""
    return sys.intern(check_label(text))


def _feature(fields: dict, column: str, kind: str) -> tuple[str, object]:
    if fields.get(column) in (None, ""):
        raise RowError(Reason.BAD_FEATURE, f"{column} is empty")
    return column, _typed(fields[column], kind, column)


def _rows(records: Iterable[tuple[int, object]], path: str, number: int, config: ReadConfig):
    """Rows or ErrorRows from (line, parsed record or RowError) pairs of one manifest."""
    folder = fileio.join(fileio.dirname(path), "")
    for line, fields in records:
        try:
            if isinstance(fields, RowError):
                raise fields
            yield make_row(fields, folder, path, row_position(number, line), config)
        except RowError as error:
            source = f"{path}:{line}" if line else path  # a tree's rows have no line
            raw = fields if isinstance(fields, dict) else {}
            key = str(raw.get("key") or raw.get("image_uri") or source)
            row = tuple((str(k), str(v)) for k, v in raw.items())
            yield ErrorRow(key, source, error.reason, error.message, row)


def _csv_records(text: io.TextIOBase) -> Iterator[tuple[int, object]]:
    """(line, fields or RowError) of each record after the header; blank lines are skipped
    and missing trailing cells read as None (as csv.DictReader does, at half its cost)."""
    reader = csv.reader(text)
    columns = None
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as error:  # e.g. a field over the csv module's size limit
            yield reader.line_num + 1, RowError(Reason.BAD_ROW, f"unparseable CSV: {error}")
            continue
        if columns is None:
            columns = cells
        elif len(cells) > len(columns):
            yield reader.line_num, RowError(Reason.BAD_ROW, "more cells than columns")
        elif len(cells) == len(columns):
            yield reader.line_num, dict(zip(columns, cells, strict=True))
        elif cells:
            yield (
                reader.line_num,
                dict(zip(columns, cells + [None] * (len(columns) - len(cells)), strict=True)),
            )


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


def _jsonl_records(text: io.TextIOBase) -> Iterator[tuple[int, object]]:
    for line, body in enumerate(text, start=1):
        if not body.strip():
            continue
        if nests_too_deep(body):
            yield line, RowError(Reason.BAD_ROW, f"JSON nested deeper than {MAX_JSON_DEPTH}")
            continue
        try:
            fields = json.loads(body)
        except ValueError as error:
            yield line, RowError(Reason.BAD_ROW, f"not JSON: {error}")
            continue
        if not isinstance(fields, dict):
            yield line, RowError(Reason.BAD_ROW, "a JSONL line must be an object")
        else:
            yield line, fields


def read_manifest(path: str, number: int, config: ReadConfig):
    """Rows and ErrorRows of one CSV or JSONL manifest, in file order, read as a stream."""
    with fileio.open_text(path) as text:
        yield from _manifest_rows(text, path, number, config)


def _manifest_rows(text: io.TextIOBase, path: str, number: int, config: ReadConfig):
    records = _csv_records(text) if manifest_kind(path) == "csv" else _jsonl_records(text)
    return _rows(records, path, number, config)


def tree_row(root: str, relative: str, number: int, config: ReadConfig):
    """A row for `root/<label>/<file>` or `root/<split>/<label>/<file>`, else a SkippedFile."""
    parts = relative.split("/")
    path = fileio.join(root, *parts)
    if len(parts) not in (2, 3) or posixpath.splitext(relative)[1].lower() not in IMAGE_EXTENSIONS:
        return SkippedFile(path)
    fields = {"image_uri": path, "label": parts[-2], "key": relative}
    if len(parts) == 3:
        fields["split"] = parts[0]
    rows = list(_rows([(0, fields)], path, number, config))
    return rows[0]


def unlisted_folder(root: str, folder: fileio.Unlisted) -> ErrorRow | SkippedFile:
    """A folder of a tree that was not listed: deeper than any image can be (skipped), or one
    that cannot be listed or was listed already (an error row; with no split, it counts as one
    row in, so the count law holds and the summary shows it)."""
    path = root if folder.path == "." else fileio.join(root, *folder.path.split("/"))
    if folder.error:
        message = f"cannot list the folder: {folder.error}"
        return ErrorRow(folder.path, path, Reason.UNREADABLE_FOLDER, message)
    if folder.same_as:
        message = f"already listed as {folder.same_as} (a symlink loop, or a second link to it)"
        return ErrorRow(folder.path, path, Reason.DUPLICATE_FOLDER, message)
    return SkippedFile(path)


def read_tree(root: str, number: int, config: ReadConfig):
    root = fileio.absolute(root)  # the rows' image paths, wherever the workers run
    for entry in fileio.walk(root, TREE_DEPTH):
        if isinstance(entry, fileio.Unlisted):
            yield unlisted_folder(root, entry)
        else:
            yield tree_row(root, entry, number, config)


def read_source(path: str, number: int, config: ReadConfig):
    """Rows, ErrorRows and SkippedFiles of manifest number `number`: a file or a folder tree."""
    if manifest_kind(path) == "tree":
        return read_tree(path, number, config)
    return read_manifest(path, number, config)


def check_manifests(patterns: list[str], config: ReadConfig) -> list[str]:
    """`--manifest` expanded to manifest paths, each checked to be usable; in launch order."""
    paths = expand_manifests(patterns)
    for path in paths:
        check_manifest(path, config)
    return paths


def expand_manifests(patterns: list[str]) -> list[str]:
    """Manifest paths from paths, globs and folders; every one must exist and be reachable."""
    try:
        return _expand(patterns)
    except fileio.UNAVAILABLE:
        raise  # the service's failure, not the manifest's: a fault
    except fileio.READ_ERRORS as error:
        raise UserError(f"--manifest: cannot reach {' '.join(patterns)} ({error})") from None


def _expand(patterns: list[str]) -> list[str]:
    paths = []
    for pattern in patterns:
        if fileio.is_dir(pattern):
            paths.append(pattern)
        elif local_glob.has_magic(pattern):
            matched = fileio.glob(pattern)
            if not matched:
                raise UserError(f"--manifest {pattern}: no file matches")
            paths += matched
        elif fileio.exists(pattern):
            paths.append(pattern)
        else:
            raise UserError(f"--manifest {pattern}: no such file or folder")
    return sorted(set(paths), key=paths.index)


def check_manifest(path: str, config: ReadConfig) -> None:
    """Fail fast, before any worker starts, on a manifest that cannot work at all."""
    kind = manifest_kind(path)
    if kind == "tree":
        for item in read_tree(path, 0, config):
            if isinstance(item, ManifestRow):
                return
            if isinstance(item, ErrorRow) and item.key == ".":
                raise UserError(f"{path}: {item.message}")
        raise UserError(f"{path}: no images found in <label>/ or <split>/<label>/ folders")
    try:
        with fileio.open_text(path) as text:
            if kind == "csv":
                _check_header(path, next(csv.reader(text), []), config)
                text.seek(0)
            has_rows = any(True for _ in _manifest_rows(text, path, 0, config))
            collections.deque(text, maxlen=0)  # decodes the rest: a bad byte fails here
    except UnicodeDecodeError as error:
        bad = error.object[error.start : error.end].hex(" ")
        raise UserError(f"{path}: the manifest is not UTF-8 text (bytes {bad})") from None
    except fileio.UNAVAILABLE:
        raise  # the service's failure, not the manifest's: a fault
    except fileio.READ_ERRORS as error:
        raise UserError(f"{path}: cannot read manifest ({error})") from None
    if not has_rows:
        raise UserError(f"{path}: the manifest has no rows")


def _check_header(path: str, header: list[str], config: ReadConfig) -> None:
    wanted = REQUIRED_COLUMNS + tuple(column for column, _ in config.features)
    missing = [column for column in wanted if column not in header]
    if missing:
        raise UserError(f"{path}: missing column(s) {', '.join(missing)}; header is {header}")
