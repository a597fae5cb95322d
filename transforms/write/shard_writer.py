"""Writing one shard: rows in, one TFRecord file and its description out.

This is where image bytes live, and the only place: each image is read, checked, encoded and
appended to the shard's file, then dropped, so memory holds one shard's rows plus one image.
Each attempt at a shard writes a file of its own in the run's staging folder; the commit step
moves the files of the attempts whose results it received into the version
(pipeline/dataset/publish.py), so a late or duplicate attempt's file is never published.
"""

import functools
import os
import posixpath
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import NamedTuple

from transforms.errors import ErrorRow, Reason, RowError
from transforms.image.detection import Placement, placed
from transforms.image.images import ImageConfig, StoredImage, decodes_every_image, normalise
from transforms.manifest.labels import LabelMap
from transforms.manifest.rows import ManifestRow, error_row, row_labels
from transforms.plan.refresh import PastRecord, fingerprint, rows_line, shifted_index
from transforms.plan.sharding import WHOLE, Piece, ShardId, record_order
from transforms.progress import ProgressReporter
from transforms.storage import fileio, gcs
from transforms.tfrecord.examples import build_example, label_features, object_features
from transforms.tfrecord.records import (
    MAX_RECORD_BYTES,
    ShardFileWriter,
    file_crc32c,
    read_records,
    shard_payload,
)

# DALI index files go in a folder of their own: beside the shards, `<split>-*` (the glob TPU
# reference readers list a split's shards with) would match them too.
INDEX_DIR = "index"
ROWS_DIR = "rows"  # per shard, what a refresh needs of each record (transforms/plan/refresh.py)
IN_FLIGHT_PER_THREAD = 8  # queued images per pool thread: bounds the writer's memory
REMOTE_THREADS_PER_CORE = 8  # object-store reads mostly wait on the network
# Larger image files are error rows, read no further than the limit. Above any photograph a
# camera writes (a 100-megapixel JPEG is 30-60 MB, its PNG 150-200 MB), far below the memory
# of a worker that holds a few images per thread (Dataflow's smallest has 3.75 GB a core).
DEFAULT_MAX_FILE_MB = 256


class WriteConfig(NamedTuple):
    output: str  # the run's staging folder
    image: ImageConfig = ImageConfig()
    compress: bool = False
    progress_dir: str | None = None  # local runs: where workers leave counts for the progress bar
    threads: int = 0  # image threads per shard writer; 0: chosen by writer_threads()
    processes: int = 1  # shards written at once on a local run (its worker processes)
    max_record_bytes: int = MAX_RECORD_BYTES
    write_index: bool = False  # a DALI `index/<shard>.idx` for each (uncompressed) shard
    max_file_bytes: int = DEFAULT_MAX_FILE_MB << 20
    # Beam worker processes on each machine, each with writers of its own; 0: one per core
    # (Dataflow's SDK harness). Their cores are shared out: process_cores().
    sdk_processes: int = 1
    drop_negatives: bool = False  # a detection row whose every box is dropped is an error row
    masks: bool = False  # detection records hold `image/object/mask` (--masks)


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
    # are that name + ".idx" / ".rows"
    rows_file: str = ""  # name of the shard's rows file in the version (refresh.py)
    piece: Piece = WHOLE  # the part of its shard this file holds (`join_staged` joins them)
    boxes_dropped: int = 0  # detection: boxes left out of records, with no area in the image


def available_cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def process_cores(sdk_processes: int, machine_cores: int) -> int:
    """The cores one of `sdk_processes` worker processes may count on, of the `machine_cores`
    they share (0 processes: one per core, so one core each). Each process sizes its writers'
    threads from its own share: sized from the machine's, N processes would start N times
    too many."""
    if sdk_processes == 0:
        return 1
    return max(1, machine_cores // sdk_processes)


def writer_threads(config: WriteConfig, remote: bool, cores: int) -> int:
    """Image threads for one shard writer that has `cores` to itself: `--threads`, or when
    that is 0, what pays here.

    Threads pay where images wait or decode outside the GIL: object-store reads, and options
    that decode every image. A local pass-through conversion is Python glue under the GIL,
    where a second thread only contends for it, so it gets one (local runs spread shards over
    processes instead: shard_processes.py).
    """
    if config.threads:
        return config.threads
    if remote:
        return cores * REMOTE_THREADS_PER_CORE
    return cores if decodes_every_image(config.image) else 1


def read_image(uri: str, max_bytes: int) -> tuple[bytes, str]:
    """The image file's bytes and identity (fileio.identity, as the read began); a file that
    cannot be had is a RowError, never a dead worker.

    A read that fails transiently is retried (transforms/storage/gcs.py), so what a shard holds
    never depends on such a failure. A read still failing after its retries is this object's error
    row if the store answers other requests about it; if the store fails those too, the
    service is down, not the object, and the shard's attempt fails (Beam retries it; the
    local runner stops with exit status 3 and publishes nothing).
    """
    try:
        return fileio.read_identified(uri, max_bytes)
    except gcs.StoreUnavailableError:
        if not gcs.store_answers(uri):
            raise
        # Not the last error's text: which transient failure came last is chance, and the
        # error rows are part of the version's bytes.
        raise RowError(
            Reason.UNAVAILABLE_FILE,
            f"{uri}: every read failed, {gcs.ATTEMPTS} attempts, while the store answered for it",
        ) from None
    except fileio.MISSING:
        raise RowError(Reason.MISSING_FILE, f"no such file: {uri}") from None
    except fileio.NotAFileError as error:
        raise RowError(Reason.NOT_A_FILE, str(error)) from None
    except fileio.FileTooLargeError as error:
        raise RowError(Reason.FILE_TOO_LARGE, f"{error} (--max_file_mb)") from None
    except fileio.READ_ERRORS as error:
        raise RowError(Reason.UNREADABLE_FILE, f"cannot read {uri}: {error}") from None


def stored_size(uri: str, max_file_bytes: int) -> int:
    """What an image file weighs in a shard-size estimate: its size, or nothing when it is
    over the limit (an error row, never stored), so one huge or sparse file cannot multiply
    a split's shards. An object whose stat keeps failing weighs nothing too if the store
    answers for it otherwise (read_image makes its error row), else the plan's step fails."""
    try:
        size = fileio.size(uri)
    except gcs.StoreUnavailableError:
        if not gcs.store_answers(uri):
            raise
        return 0
    return size if size <= max_file_bytes else 0


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
    placement = Placement(
        stored.source_width,
        stored.source_height,
        stored.orientation,
        stored.applied,
        stored.width,
        stored.height,
    )
    kept, dropped = placed(row.objects, placement)
    if config.drop_negatives and dropped and not kept:
        raise RowError(Reason.BAD_ANNOTATION, f"none of its {dropped} boxes is in the image")
    object_ids = tuple(ids[item.label] for item in kept)
    features = object_features(kept, object_ids, config.masks)
    return features, tuple(sorted(set(object_ids))), dropped


def make_record(
    row: ManifestRow, labels: LabelMap, config: WriteConfig
) -> tuple[bytes, tuple[int, ...], str, int]:
    """The serialized Example for a row, the label ids it holds, its fingerprint and the boxes
    it dropped; raises RowError. Labels are looked up before the image is read."""
    if row.objects is None:
        label_fields, label_ids = class_labels(row, labels)
    else:
        ids = {label: labels.id_of(label) for label in row_labels(row)}
    data, identity = read_image(row.image_uri, config.max_file_bytes)
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


def ordered_unique(rows: Iterable[ManifestRow]) -> Iterator[ManifestRow | ErrorRow]:
    """Rows in record order; a key seen before (earlier in the manifests) becomes an error."""
    previous = None
    for row in sorted(rows, key=lambda r: (record_order(r.key), r.position)):
        if previous is not None and row.key == previous.key:
            yield error_row(row, Reason.DUPLICATE_KEY, f"key also used at {previous.source}")
        else:
            previous = row
            yield row


def _record_or_error(item: ManifestRow | ErrorRow, labels: LabelMap, config: WriteConfig):
    """Runs on a pool thread: (row or error, record or None, label ids, row fingerprint,
    boxes dropped)."""
    if isinstance(item, ErrorRow):
        return item, None, None, None, 0
    try:
        return item, *make_record(item, labels, config)
    except RowError as error:
        return error_row(item, error.reason, error.message), None, None, None, 0


def ordered_map(pool: Executor | None, function, items: Iterable, window: int) -> Iterator:
    """`map` over a thread pool with at most `window` results in flight, in input order.

    The order makes the shard deterministic; the window bounds memory to a few images
    however long the shard is.
    """
    if pool is None:
        yield from map(function, items)
        return
    pending: deque = deque()
    for item in items:
        pending.append(pool.submit(function, item))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def write_shard(
    shard: ShardId,
    rows: Iterable[ManifestRow],
    labels: LabelMap,
    config: WriteConfig,
    pool: ThreadPoolExecutor | None = None,
    threads: int = 1,
    piece: Piece = WHOLE,
) -> Iterator[ShardResult | ErrorRow]:
    """Write `shard` (or one `piece` of it) from its rows; yields an ErrorRow per rejected row,
    then the ShardResult.

    With a `pool` of `threads`, images are read, checked and encoded on its threads (Pillow,
    hashlib and file reads release the GIL), a few per thread at once; records are still
    written one at a time, in order.
    """
    name = shard.file_name(config.compress)
    # A name of its own: a retried or speculative attempt at this shard writes beside it.
    staged = f"{name}.{os.urandom(16).hex()}"
    temp = fileio.join(config.output, staged)
    writer = ShardFileWriter(fileio.create(temp), compress=config.compress)
    progress = ProgressReporter(config.progress_dir, name)
    label_counts: dict[int, int] = {}
    row_lines: list[str] = []
    boxes_dropped = 0
    convert = functools.partial(_record_or_error, labels=labels, config=config)
    try:
        in_flight = IN_FLIGHT_PER_THREAD * threads
        converted = ordered_map(pool, convert, ordered_unique(rows), in_flight)
        for item, record, label_ids, digest, dropped in converted:
            progress.add(1)
            if record is None:
                yield item
                continue
            writer.write(record)
            boxes_dropped += dropped
            row_lines.append(rows_line(PastRecord(item.key, digest, label_ids)))
            for label_id in label_ids:
                label_counts[label_id] = label_counts.get(label_id, 0) + 1
    finally:
        writer.close()
        progress.flush()
    fileio.sync_file(temp)  # on disk before any marker can promise it
    index_file = f"{INDEX_DIR}/{name}.idx" if config.write_index else ""
    if index_file:
        write_synced(f"{temp}.idx", writer.index_text().encode())
    write_synced(f"{temp}.rows", "".join(row_lines).encode())
    yield ShardResult(
        *shard,
        name,
        writer.records,
        writer.bytes,
        writer.crc32c,
        tuple(sorted(label_counts.items())),
        index_file,
        staged,
        f"{ROWS_DIR}/{name}.rows",
        piece,
        boxes_dropped,
    )


def join_staged(parts: list[ShardResult], staging: str, compress: bool) -> ShardResult:
    """One staged shard holding `parts`' records in order: their files one after another (on
    an object store, composed there: no byte passes through this process), with their rows and
    index files alike. Gzip parts are written again record by record as one gzip stream: not
    every reader reads on past a gzip member's end. The parts' files are left in staging
    (which the commit deletes), so a retried join finds them."""
    staged = f"{parts[0].file}.joined.{os.urandom(16).hex()}"
    target = fileio.join(staging, staged)
    sources = [fileio.join(staging, part.staged) for part in parts]
    if compress:
        writer = ShardFileWriter(fileio.create(target), compress=True)
        for source in sources:
            for _, record in read_records(shard_payload(fileio.read_bytes(source), "gzip")):
                writer.write(record)
        writer.close()
        size, crc = writer.bytes, writer.crc32c
    else:
        size, crc = (
            sum(part.bytes for part in parts),
            file_crc32c(fileio.join_files(sources, target)),
        )
    fileio.sync_file(target)
    rows = [fileio.read_text(f"{source}.rows") for source in sources]
    write_synced(f"{target}.rows", "".join(rows).encode())
    if parts[0].index_file:
        texts = [fileio.read_text(f"{source}.idx") for source in sources]
        write_synced(f"{target}.idx", shifted_index(texts, [part.bytes for part in parts]).encode())
    labels: Counter = Counter()
    for part in parts:
        labels.update(dict(part.label_counts))
    return parts[0]._replace(
        records=sum(part.records for part in parts),
        bytes=size,
        crc32c=crc,
        label_counts=tuple(sorted(labels.items())),
        staged=staged,
        piece=WHOLE,
        boxes_dropped=sum(part.boxes_dropped for part in parts),
    )


def write_synced(path: str, data: bytes) -> None:
    fileio.write_bytes(path, data)
    fileio.sync_file(path)
