"""Manifest rows: the row every reader makes (`ManifestRow`), what the readers are told
(`ReadConfig`), and where a row came from.

A record is known by where it is in its file, a byte offset or a row index, which whoever reads
any piece of the file knows without reading the rest (transforms/manifest/pieces.py). How a
record's fields become a row is transforms/manifest/fields.py's.
"""

import json
from typing import NamedTuple

from tfrecord_pipeline.transforms.archive.members import Member
from tfrecord_pipeline.transforms.errors import ErrorRow, Reason
from tfrecord_pipeline.transforms.manifest.splits import SplitSpec

FEATURE_TYPES = ("int64", "float", "bytes")
PARQUET_SUFFIX = ".parquet"


class ReadConfig(NamedTuple):
    """What the readers need from the options (kept small: it is pickled to workers)."""

    split_spec: SplitSpec | None = None
    features: tuple[tuple[str, str], ...] = ()  # (column, type) for --feature
    label_separator: str | None = None  # with --multi_label: a row's label is a tuple
    image_root: str = ""  # --image_root with a trailing separator: relative images are under it
    detection: bool = False  # rows list objects (transforms/image/detection.py), not one label
    drop_negatives: bool = False  # a detection row with no objects is counted, not converted
    masks: bool = False  # a detection row's objects keep their masks (transforms/image/masks.py)
    # --archive_order keep: the run's manifest count, which archive members are placed among
    # (transforms/plan/sharding.py kept_point); 0: members are mixed by key hash.
    keep_order: int = 0
    # The run's staging folder, where a container read in order (a .tar.gz, a Parquet or Arrow
    # file of image bytes) is unpacked (transforms/archive/unpack.py), and the largest image
    # unpacked (--max_file_mb; a larger one is a file_too_large row, never copied).
    unpack_to: str = ""
    max_file_bytes: int = 0
    label_field: str = "label"  # --label_field: a WebDataset sample's label in its .json
    ground_truth: str = ""  # --ground_truth, absolute: a flat archive's labels, read where it is


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
    source_path: str  # the manifest's (a COCO file's + COCO_IMAGES); in a tree the image's
    position: int  # row_position(manifest number, offset): "first" among duplicate keys
    folder: str = ""  # the manifest's folder and a separator, for a relative `image`; else ""
    objects: tuple | None = None  # a detection row's annotated objects; None when classifying
    member: Member | None = None  # an archive member's place, when listed from its archive

    @property
    def image_uri(self) -> str:
        """The image's absolute local path or scheme URI."""
        return self.folder + self.image

    @property
    def source(self) -> str:
        """Where the row came from, for error reports (see `record_source`); in a class-folder
        tree or an archive, the image's path or member URI."""
        if self.member is not None:
            return self.image_uri
        stored = self.position & OFFSET_MASK
        return record_source(self.source_path, stored - 1) if stored else self.image_uri


def row_labels(row: ManifestRow) -> tuple[str, ...]:
    """Every label a row carries, which the label map must give an id: its label, its labels
    (--multi_label), or its objects' labels."""
    if row.objects is not None:
        return tuple(obj.label for obj in row.objects)
    return (row.label,) if type(row.label) is str else row.label


_OFFSET_BITS = 48  # a byte offset in a manifest of up to 256 TB
OFFSET_MASK = (1 << _OFFSET_BITS) - 1


def row_position(manifest_number: int, offset: int | None) -> int:
    """One int that sorts rows as the manifests list them: by manifest, then by where in it.
    `offset`: the record's byte offset (CSV, JSONL) or row index (Parquet); None for a row of
    a class-folder tree, which has no place in a file (stored as 0, an offset as offset + 1)."""
    return manifest_number << _OFFSET_BITS | (0 if offset is None else offset + 1)


COCO_IMAGES = "#images"  # what a COCO file's rows add to its path: their offset is an index


def manifest_number(row: ManifestRow) -> int:
    """The place among --manifest of the manifest a row came from (see row_position)."""
    return row.position >> _OFFSET_BITS


def record_source(path: str, offset: int) -> str:
    """Where a record is, for error reports: `<manifest>@<byte offset>` for a CSV or JSONL line
    (`tail -c +<offset + 1> <manifest> | head -n 1` prints it), `<manifest>#<row index>` for a
    Parquet row, `<file>#images[<index>]` for an image of a COCO file, all counted from 0."""
    if path.endswith(COCO_IMAGES):
        return f"{path}[{offset}]"
    mark = "#" if path.lower().endswith((PARQUET_SUFFIX, ".arrow")) else "@"
    return f"{path}{mark}{offset}"


class SkippedFile(NamedTuple):
    """A non-image file, or a folder deeper than any image can be, met in a class-folder tree:
    counted, not converted."""

    path: str


class DroppedNegative(NamedTuple):
    """With --drop_negatives, a detection row listing no objects: counted, not converted (so
    rows in = records out + error rows still holds: it is not a row in)."""

    source: str


def error_row(row: ManifestRow, reason: Reason, message: str) -> ErrorRow:
    """A parsed row rejected later (by its label, its image, its key), with its fields."""
    label = row.label if type(row.label) is str else json.dumps(row.label, ensure_ascii=False)
    fields = (("image_uri", row.image_uri), ("label", label), ("split", row.split))
    return ErrorRow(row.key, row.source, reason, message, fields, row.split)
