"""Writing one shard: rows in, one shard file (TFRecord or ArrayRecord) and its description out.

This is where image bytes live, and the only place: each image is read, checked, encoded and
appended to the shard's file, then dropped, so memory holds one shard's rows plus one image.
Each attempt at a shard writes a file of its own in the run's staging folder; the commit step
moves the files of the attempts whose results it received into the version
(pipeline/dataset/publish.py), so a late or duplicate attempt's file is never published.
"""

import functools
import itertools
import posixpath
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from tfrecord_pipeline.transforms.archive.runs import with_runs
from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, RowError
from tfrecord_pipeline.transforms.image.config import ImageConfig, StoredImage
from tfrecord_pipeline.transforms.image.files import local_file, read_image
from tfrecord_pipeline.transforms.image.images import normalise
from tfrecord_pipeline.transforms.image.placement import Placement, placed
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, error_row, row_labels
from tfrecord_pipeline.transforms.plan.fingerprints import fingerprint
from tfrecord_pipeline.transforms.plan.rows_files import PastRecord, rows_file_name, write_rows_file
from tfrecord_pipeline.transforms.plan.sharding import WHOLE, Piece, ShardId, row_order
from tfrecord_pipeline.transforms.progress import SILENT, Progress
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.storage.read_ahead import Opened, read_ahead
from tfrecord_pipeline.transforms.tfrecord.examples import (
    build_example,
    label_features,
    object_features,
)
from tfrecord_pipeline.transforms.tfrecord.records import MAX_RECORD_BYTES
from tfrecord_pipeline.transforms.write.formats import ShardFormat
from tfrecord_pipeline.transforms.write.in_flight import images_in_flight, ordered_map

# DALI index files go in a folder of their own: beside the shards, `<split>-*` (the glob TPU
# reference readers list a split's shards with) would match them too.
INDEX_DIR = "index"
INDEX_SUFFIX = ".idx"  # a staged shard's index file is its staged name and this
DEFAULT_READ_LATENCY_MS = 40.0  # Cloud Storage's time to first byte, as the README models it
# Larger image files are error rows, read no further. Above any camera's photograph (100 MP:
# JPEG 30-60 MB, PNG 150-200 MB), far below a worker's memory (Dataflow's: 3.75 GB a core).
DEFAULT_MAX_FILE_MB = 256


class WriteConfig(NamedTuple):
    staging: str  # the run's staging folder
    image: ImageConfig = ImageConfig()
    shard_format: ShardFormat = ShardFormat()  # --file_format and --compression
    threads: int = 0  # image threads per shard writer; 0: chosen by writer_threads()
    processes: int = 1  # shards written at once on a local run (its worker processes)
    max_record_bytes: int = MAX_RECORD_BYTES
    write_index: bool = False  # a DALI `index/<shard>.idx` for each uncompressed TFRecord shard
    max_file_bytes: int = DEFAULT_MAX_FILE_MB << 20
    # Beam worker processes on each machine, each with writers of its own; 0: one per core
    # (Dataflow's SDK harness). Their cores are shared out: process_cores().
    sdk_processes: int = 1
    drop_negatives: bool = False  # a detection row whose every box is dropped is an error row
    masks: bool = False  # detection records hold `image/object/mask` (--masks)
    read_latency_ms: float = DEFAULT_READ_LATENCY_MS  # --read_latency_ms: threads.py
    sync: bool = True  # each file flushed to the disk by its writer (local: local/flushes.py)


class ShardResult(NamedTuple):
    split: str
    index: int
    count: int
    file: str  # name inside the output folder
    records: int
    bytes: int
    crc32c: str  # of the file as stored, in Cloud Storage's form
    label_counts: tuple[tuple[int, int], ...]  # (label id, records holding it)
    index_file: str = ""  # name of the shard's DALI .idx file in the version, when written
    staged: str = ""  # this attempt's file in the staging folder; its index and rows files
    # are that name + INDEX_SUFFIX / ROWS_SUFFIX
    rows_file: str = ""  # its rows file's name in the version (transforms/plan/rows_files.py)
    piece: Piece = WHOLE  # the part of its shard this file holds (`join_staged` joins them)
    boxes_dropped: int = 0  # detection: boxes left out of records, with no area in the image


def index_file_name(shard_file: str) -> str:
    """The DALI index file's name in a version, for the shard named `shard_file`."""
    return f"{INDEX_DIR}/{shard_file}{INDEX_SUFFIX}"


def class_labels(row: ManifestRow, labels: LabelMap) -> tuple[dict, tuple[int, ...]]:
    """A classification row's label features and the distinct label ids it holds; several
    labels (--multi_label) in id order."""
    if type(row.label) is str:
        label_id = labels.id_of(row.label)
        return label_features((label_id,), (row.label,), False), (label_id,)
    pairs = sorted((labels.id_of(label), label) for label in row.label)
    ids, texts = tuple(i for i, _ in pairs), tuple(text for _, text in pairs)
    return label_features(ids, texts, True), ids


def object_labels(
    row: ManifestRow, ids: dict[str, int], stored: StoredImage, config: WriteConfig
) -> tuple[dict, tuple[int, ...], int]:
    """A detection row's object features on its stored image, the distinct label ids they
    hold, and how many boxes were dropped (no area left in the image). With --drop_negatives
    a row whose every box was dropped is a `bad_annotation`: it was counted as a row in."""
    placement = Placement.of(stored)
    kept, dropped = placed(row.objects, placement)
    if config.drop_negatives and dropped and not kept:
        raise RowError(Reason.BAD_ANNOTATION, f"none of its {dropped} boxes is in the image")
    object_ids = tuple(ids[item.label] for item in kept)
    features = object_features(kept, object_ids, config.masks)
    return features, tuple(sorted(set(object_ids))), dropped


def make_record(
    row: ManifestRow, labels: LabelMap, config: WriteConfig, data: bytes | Opened | None = None
) -> tuple[bytes, tuple[int, ...], str, int]:
    """The serialized Example for a row, the label ids it holds, its fingerprint and the boxes
    it dropped; raises RowError. Labels are looked up before the image is read (`data`: its
    bytes, read already in a run of its archive's members, or its file opened ahead)."""
    if row.objects is None:
        label_fields, label_ids = class_labels(row, labels)
    else:
        ids = {label: labels.id_of(label) for label in row_labels(row)}
    if data is None or type(data) is Opened:
        data, identity = read_image(row.image_uri, config.max_file_bytes, row.member, data)
    else:
        identity = row.member.identity
    stored = normalise(data, config.image)
    dropped = 0
    if row.objects is not None:
        label_fields, label_ids, dropped = object_labels(row, ids, stored, config)
    filename = posixpath.basename(row.image_uri.replace("\\", "/"))
    record = build_example(stored, label_fields, filename, row.key, row.features)
    if len(record) > config.max_record_bytes:
        raise RowError(
            Reason.RECORD_TOO_LARGE,
            f"record of {len(record):,} bytes is over {config.max_record_bytes:,}",
        )
    return record, label_ids, fingerprint(row, identity), dropped


class SortedRuns(tuple):
    """A shard's (or piece's) rows as runs, contiguous ranges of record order (the local
    runner's, transforms/local/shards.py), each sorted alone: its writer holds one at a time."""


def in_record_order(rows: Iterable[ManifestRow] | SortedRuns, count: int) -> Iterator:
    """`ordered_unique` of the rows, or of each run in turn (a key's repeats meet in a run):
    the same rows in the same order either way."""
    if not isinstance(rows, SortedRuns):
        return ordered_unique(rows, count)
    return itertools.chain.from_iterable(ordered_unique(run, count) for run in rows)


def ordered_unique(rows: Iterable[ManifestRow], count: int) -> Iterator[ManifestRow | ErrorRow]:
    """Rows in record order (`row_order` in a split of `count` shards); a key seen before
    (earlier in the manifests) becomes an error."""
    # Two stable sorts, not one by (record_order, position): the pair's sort keys would hold
    # ~180 bytes a row at once (180 MB for a shard of 10^6 rows), record_order's alone ~90.
    ordered = sorted(rows, key=lambda r: r.position)
    ordered.sort(key=lambda r: row_order(r, count))
    previous = None
    for row in ordered:
        if previous is not None and row.key == previous.key:
            yield error_row(row, Reason.DUPLICATE_KEY, f"key also used at {previous.source}")
        else:
            previous = row
            yield row


def _record_or_error(pair: tuple, labels: LabelMap, config: WriteConfig):
    """On a pool thread: (row or error, record or None, label ids, fingerprint, boxes dropped),
    from a row (or error) and its image's bytes (or why it has none) when read already."""
    item, data = pair
    if isinstance(data, RowError):
        item, data = error_row(item, data.reason, data.message), None
    if isinstance(item, ErrorRow):
        return item, None, None, None, 0
    try:
        return item, *make_record(item, labels, config, data)
    except RowError as error:
        return error_row(item, error.reason, error.message), None, None, None, 0


def write_shard(
    shard: ShardId,
    rows: Iterable[ManifestRow] | SortedRuns,
    labels: LabelMap,
    config: WriteConfig,
    pool: ThreadPoolExecutor | None = None,
    threads: int = 1,
    piece: Piece = WHOLE,
    progress: Progress = SILENT,
    portion: Callable[[Iterator], Iterator] | None = None,
) -> Iterator[ShardResult | ErrorRow]:
    """Write `shard` (or one `piece` of it) from its rows, telling `progress` each row done;
    yields an ErrorRow per rejected row, then the ShardResult. `portion`: of the rows (and
    duplicate-key error rows) in record order, those this writer writes (local/tail.py).
    With a `pool` of `threads`, images are read, checked and encoded on its threads (Pillow,
    hashlib and file reads release the GIL), a few per thread at once; records are written
    one at a time, in order."""
    name = shard.file_name(config.shard_format.suffix)
    staged = fileio.staged_name(name)  # its own: a retried attempt at it writes beside it
    temp = fileio.join(config.staging, staged)
    writer = config.shard_format.writer(temp)
    count = progress.shard(f"{name}.{piece.index}")
    label_counts: dict[int, int] = {}
    past: list[PastRecord] = []  # what its rows file lists
    boxes_dropped = 0
    convert = functools.partial(_record_or_error, labels=labels, config=config)
    try:
        in_flight = images_in_flight(threads)
        ordered = in_record_order(rows, shard.count)
        items = with_runs(portion(ordered) if portion else ordered, config.max_file_bytes)
        converted = ordered_map(pool, convert, read_ahead(items, local_file), in_flight)
        for item, record, label_ids, digest, dropped in converted:
            count.add(1, rejected=int(record is None))
            if record is None:
                yield item
                continue
            writer.write(record)
            boxes_dropped += dropped
            past.append(PastRecord(item.key, digest, label_ids))
            for label_id in label_ids:
                label_counts[label_id] = label_counts.get(label_id, 0) + 1
    finally:
        writer.close()
        count.flush()
    if config.sync:
        fileio.sync_file(temp)  # on disk before any marker can promise it
    index_file = index_file_name(name) if config.write_index else ""
    if index_file:
        write = fileio.write_synced if config.sync else fileio.write_bytes
        write(f"{temp}{INDEX_SUFFIX}", writer.index_text().encode())
    write_rows_file(temp, past, config.sync)
    yield ShardResult(
        *shard,
        name,
        writer.records,
        writer.bytes,
        writer.crc32c,
        tuple(sorted(label_counts.items())),
        index_file,
        staged,
        rows_file_name(name),
        piece,
        boxes_dropped,
    )
