"""What `--manifest` names, and the reading of any piece of it.

The launcher expands the paths and globs and reads no more of each file than its start: a CSV's
header, a JSONL file's first lines, a Parquet footer (a `gs://` object by ranged reads), so its
memory is the same for a manifest of a hundred rows or a hundred million. What it finds, a
`ManifestFile`, is all a reader needs to read any byte range of the file on its own: the Beam
pipeline reads each file as many pieces on many workers (transforms/beam/manifests.py), the local
runner as one piece (transforms/local/manifests.py), and both get the same rows, by the same rules.

A line that is not UTF-8, or that the parser refuses, is an error row wherever it is: only the
start of a file is read before the run, so a bad byte further on is found by the worker that
reads it, and never ends the run.
"""

import glob as local_glob
import io
import posixpath
from collections.abc import Callable, Iterator
from typing import NamedTuple

from tfrecord_pipeline.transforms.archive.kinds import (
    archives_in,
    holds_an_archive,
    is_archive_name,
)
from tfrecord_pipeline.transforms.errors import ErrorRow, UserError
from tfrecord_pipeline.transforms.manifest import arrow, embedded, parquet, pieces, trees
from tfrecord_pipeline.transforms.manifest.archives import read_archive
from tfrecord_pipeline.transforms.manifest.coco import CocoImage, read_images
from tfrecord_pipeline.transforms.manifest.embedded import Embedded, unpacking
from tfrecord_pipeline.transforms.manifest.fields import record_row
from tfrecord_pipeline.transforms.manifest.lines import line_records
from tfrecord_pipeline.transforms.manifest.rows import (
    COCO_IMAGES,
    PARQUET_SUFFIX,
    DroppedNegative,
    ManifestRow,
    ReadConfig,
)
from tfrecord_pipeline.transforms.manifest.starts import HEAD_BYTES, json_kind, read_start
from tfrecord_pipeline.transforms.storage import fileio, gcs

WHOLE_KINDS = ("tree", "coco", "archive", "arrow")  # read by one reader each, never in pieces
Item = ManifestRow | ErrorRow | DroppedNegative


class ManifestFile(NamedTuple):
    """One manifest as the launcher found it: all a reader needs to read any piece of it."""

    number: int  # its place among the manifests, which decides the "first" of a repeated key
    path: str
    kind: str  # "csv", "jsonl", "parquet", read in pieces; "coco", "archive" (a tar or zip),
    # "arrow" (an Arrow IPC file or stream) read whole; or "tree" (a class-folder root)
    columns: tuple[str, ...] = ()  # a CSV's header; the Parquet columns a row can use
    body: int = 0  # the byte where records begin (after a CSV's header line)
    size: int = 0  # the file's size in bytes when the launcher looked: where reading ends
    detection: bool = False  # its rows list objects: a COCO file, or JSONL whose first row does
    embedded: Embedded | None = None  # where a Parquet or Arrow file holds its images, if it does
    identity: str = ""  # an archive's, when the launcher looked (fileio.identity)


def detection_config(manifests: list[ManifestFile], config: ReadConfig) -> ReadConfig:
    """The read settings for these manifests: a detection dataset when they list objects; a
    dataset is one or the other, so manifests that disagree are a usage error."""
    kinds = {manifest.detection: manifest.path for manifest in manifests}
    if len(kinds) > 1:
        raise UserError(
            f"{kinds[True]} lists objects (detection) and {kinds[False]} does not "
            "(classification): convert them as two datasets"
        )
    return config._replace(detection=True in kinds)


def check_manifests(patterns: list[str], config: ReadConfig) -> list[ManifestFile]:
    """`--manifest` expanded to manifest files, each checked to be usable; in launch order."""
    return [describe(path, number, config) for number, path in enumerate(expand(patterns))]


def expand(patterns: list[str]) -> list[str]:
    """Manifest paths from paths, globs and folders (a path is found to exist when it is read,
    one request less on a store)."""
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
            paths += archives_in(pattern) or arrow.saved_dataset(pattern) or [pattern]
        elif local_glob.has_magic(pattern):
            matched = fileio.glob(pattern)
            if not matched:
                raise UserError(f"--manifest {pattern}: no file matches")
            paths += matched
        else:
            paths.append(pattern)
    return sorted(set(paths), key=paths.index)


def manifest_kind(path: str) -> str:
    """What a manifest is, from its name: "tree" (a folder), "csv", "jsonl", "parquet" or
    "archive"; a name that says none of them, from its first bytes (`archive_kind`)."""
    if not path.strip():  # else read as the current folder's name, ".", said not to be there
        raise UserError("--manifest is empty; name a manifest file or class-folder root")
    if fileio.is_dir(path):
        return "tree"
    lower = path.lower()
    if lower.endswith(".csv"):
        return "csv"
    if lower.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if lower.endswith(PARQUET_SUFFIX):
        return "parquet"
    if lower.endswith(arrow.ARROW_SUFFIX):
        return "arrow"
    if is_archive_name(lower) or holds_an_archive(path):
        return "archive"
    named_as_folder = path.endswith("/") or not posixpath.splitext(path)[1]
    if named_as_folder and not fileio.exists(path):  # a class-folder root, mistyped
        raise UserError(f"--manifest: {fileio.not_there(path, folder=True)}")
    raise UserError(
        f"{path}: a manifest must be .csv, .jsonl, .parquet, a tar or zip archive, or a "
        "class-folder directory"
    )


def describe(path: str, number: int, config: ReadConfig) -> ManifestFile:
    """Fail fast, before any worker starts, on a manifest that cannot work at all, reading no
    more than its start; what a reader of its pieces needs to know."""
    kind = manifest_kind(path)
    if kind == "tree":
        trees.check_tree(path, number, config)
        return ManifestFile(number, path, "tree")
    if kind == "archive":
        return _archive(path, number)
    try:
        with fileio.open_bytes(path, HEAD_BYTES) as stream:
            size = stream.seek(0, io.SEEK_END)
            detection, found = False, None
            if kind == "jsonl":
                kind, detection = json_kind(stream, size)
            if kind == "parquet":
                columns, has_rows, found = parquet.usable_columns(stream, path, config)
                body = 0
            elif kind == "arrow":
                columns, has_rows, found = arrow.usable_columns(stream, path, config)
                body = 0
            elif kind == "coco":
                columns, body, has_rows = (), 0, True  # its images are counted where read
            else:
                columns, body, has_rows = read_start(stream, path, kind, size, config)
    except fileio.MISSING:
        raise UserError(f"--manifest: {fileio.not_there(path)}") from None
    except fileio.UNAVAILABLE:
        raise  # the service's failure, not the manifest's: a fault
    except fileio.READ_ERRORS as error:
        raise UserError(f"{path}: cannot read manifest ({error})") from None
    if not has_rows:
        raise UserError(f"{path}: the manifest has no rows")
    return ManifestFile(number, path, kind, columns, body, size, detection, found)


def _archive(path: str, number: int) -> ManifestFile:
    """An archive, checked to be there: what it holds is told by its rows (a garbage or
    compressed file is an error row, as a member is; the launcher reads no member)."""
    try:
        listed = gcs.listed_stat(path) if gcs.is_gcs(path) else None  # of a folder or a glob
        size, identity = listed or fileio.stat(path)
    except fileio.MISSING:
        raise UserError(f"--manifest: {fileio.not_there(path)}") from None
    except fileio.UNAVAILABLE:
        raise
    except fileio.READ_ERRORS as error:
        raise UserError(f"{path}: cannot read the archive ({error})") from None
    return ManifestFile(number, fileio.absolute(path), "archive", size=size, identity=identity)


def read_piece(
    manifest: ManifestFile,
    start: int,
    end: int,
    config: ReadConfig,
    claim: Callable[[int], bool] | None = None,
) -> Iterator[Item]:
    """The rows and error rows of the records that the byte range [start, end) of a CSV, JSONL
    or Parquet manifest owns. `claim(offset)`, when given, is asked before each record, with
    the offset where it (a Parquet row's row group) begins, and reading stops at its first no;
    then `claim(end)` says the range holds no more."""
    folder = fileio.join(fileio.dirname(manifest.path), "")
    path, number = manifest.path, manifest.number
    with fileio.open_bytes(path, pieces.READ_BYTES) as stream:
        if manifest.kind == "parquet":
            claimed, found = None, manifest.embedded
            rows = embedded.ROWS_PER_READ if found else parquet.ROWS_PER_READ
            records = parquet.piece_records(stream, start, end, manifest.columns, rows)
            with unpacking(path, number, found, config, start) as to_row:
                for group, row, fields in records:
                    if claim is not None and group != claimed:
                        if not claim(group):
                            return
                        claimed = group
                    yield to_row(fields, row, folder)
        else:
            lines = pieces.piece_lines(stream.seek, stream.read, start, end, manifest.body)
            for offset, fields in line_records(lines, manifest.kind, manifest.columns):
                if claim is not None and not claim(offset):
                    return
                yield record_row(fields, offset, folder, path, number, config)
    if claim is not None:
        claim(end)


def read_coco(manifest: ManifestFile, config: ReadConfig) -> Iterator[Item]:
    """Every row and error row of a COCO file, read whole (one JSON document); its images'
    `file_name`s are under --image_root, else the file's folder."""
    folder = fileio.join(fileio.dirname(manifest.path), "")
    rows_of = manifest.path + COCO_IMAGES  # row sources: <file>#images[<index>]

    def row(image: CocoImage) -> Item:
        fields, number = image.fields, manifest.number
        return record_row(fields, image.index, folder, rows_of, number, config, image.annotations)

    return read_images(fileio.read_bytes(manifest.path), manifest.path, row, config.masks)


def read_all(manifest: ManifestFile, config: ReadConfig) -> Iterator[trees.TreeItem]:
    """Every row, error row and skipped file of one manifest, read in this process."""
    if manifest.kind == "tree":
        return trees.read_folders(trees.tree_root(manifest.path, manifest.number), config)
    if manifest.kind == "coco":
        return read_coco(manifest, config)
    if manifest.kind == "archive":
        return read_archive(manifest.path, manifest.number, manifest.size, config)
    if manifest.kind == "arrow":
        return arrow.read_arrow(manifest, config)
    return read_piece(manifest, manifest.body, manifest.size, config)
