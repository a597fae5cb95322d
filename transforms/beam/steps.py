"""The Beam steps of a conversion: thin wrappers over the pure modules beside this one.

Element shapes between steps (a RowBatch holds up to ROWS_PER_BATCH ManifestRows):
    ReadManifests   -> {"rows": RowBatch, "errors": ErrorRow, "skipped": SkippedFile,
                        "negatives": DroppedNegative}
        files: ManifestFile -> pieces of it (an OffsetRange restriction) -> rows
        COCO files: ManifestFile -> rows (one JSON document, read whole)
        trees: TreeFolder -> rows, and subfolders to list at the next level
    DropDuplicateContent (--dedup) -> {"rows": RowBatch, "errors": ErrorRow}
    PlanDataset     -> DatasetPlan            (one element; a side input downstream)
    AssignShards    -> ((split, index, count, piece, pieces), RowBatch of that piece's rows)
                                              (+ "errors"; pieces is 1 for most shards)
    WriteShards     -> {"shards": ShardResult, "errors": ErrorRow}   (pieces joined)
    WriteErrors     ErrorRow -> {"files": ErrorFileResult, "counts": ErrorCounts (one element)}
Only manifest rows cross the GroupByKey in WriteShards, and then only ShardResults of pieces;
image bytes are read after it. Error rows cross one more, grouped by errors file.
"""

from collections import Counter
from collections.abc import Iterable

import apache_beam as beam
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.metrics import Metrics
from apache_beam.pvalue import AsSingleton, TaggedOutput
from apache_beam.transforms.core import RestrictionProvider

from transforms.beam.coders import RowBatchCoder
from transforms.errors import ErrorRow
from transforms.manifest.rows import DroppedNegative, ManifestRow, ReadConfig, RowBatch
from transforms.manifest.sources import ManifestFile, read_coco, read_piece
from transforms.manifest.trees import TREE_DEPTH, TreeFolder, list_folder, tree_root
from transforms.plan.dataset import (
    PlanAccumulator,
    PlanConfig,
    ShardCounts,
    all_shards,
    decide_plan,
    group_by_shard,
)
from transforms.plan.dedup import content_digest, keep_first
from transforms.plan.sharding import Piece, ShardId, piece_of
from transforms.write.error_files import (
    ErrorCounts,
    ErrorFileResult,
    counted_as,
    error_file_count,
    file_of,
    write_error_file,
)
from transforms.write.shard_processes import ShardWriter, shard_task
from transforms.write.shard_writer import ShardResult, WriteConfig, join_staged

NAMESPACE = "tfrecord_pipeline"
# Rows per element between steps: large enough that Beam's per-element cost vanishes, small
# enough that an element stays around a megabyte.
ROWS_PER_BATCH = 1000
# Bytes of a manifest file per piece read by one worker: about a million rows, a piece big
# enough to amortise its start and small enough to spread; a runner may split a piece further
# while it is read.
PIECE_BYTES = 64 << 20
# Coded as plain tuples, with a size estimate that codes nothing (transforms/beam/coders.py).
beam.coders.registry.register_coder(RowBatch, RowBatchCoder)


def _count_error(error: ErrorRow) -> TaggedOutput:
    Metrics.counter(NAMESPACE, f"error_{error.reason.value}").inc()
    return TaggedOutput("errors", error)


def _outputs(items):
    """A reader's rows in RowBatches, its error rows and skipped files tagged, all counted."""
    rows = []
    for item in items:
        if isinstance(item, ManifestRow):
            rows.append(item)
            if len(rows) == ROWS_PER_BATCH:
                yield _row_batch(rows)
                rows = []
        elif isinstance(item, ErrorRow):
            yield _count_error(item)
        elif isinstance(item, TreeFolder):
            yield TaggedOutput("folders", item)
        elif isinstance(item, DroppedNegative):
            Metrics.counter(NAMESPACE, "negatives_dropped").inc()
            yield TaggedOutput("negatives", item)
        else:
            Metrics.counter(NAMESPACE, "skipped_files").inc()
            yield TaggedOutput("skipped", item)
    if rows:
        yield _row_batch(rows)


def _row_batch(rows: list[ManifestRow]) -> RowBatch:
    Metrics.counter(NAMESPACE, "rows").inc(len(rows))
    return RowBatch(tuple(rows))


# A splittable DoFn's tracker parameter; with no provider named, the DoFn is its own.
_THIS_DOFNS_RESTRICTION = beam.DoFn.RestrictionParam()


# Declared output types spare Beam from inferring them by walking our bytecode at every launch.
@beam.typehints.with_output_types(RowBatch)
class _ReadPiecesFn(beam.DoFn, RestrictionProvider):
    """A splittable DoFn: a manifest file's restriction is the byte range of its records, split
    into pieces of `piece_bytes` that workers read apart; each record's offset is claimed
    before its row is taken, so a runner can split a piece while it is read (Dataflow's
    dynamic work rebalancing) and every record is still read once
    (transforms/manifest/pieces.py)."""

    def __init__(self, config: ReadConfig, piece_bytes: int):
        self._config = config
        self._piece_bytes = piece_bytes

    def initial_restriction(self, manifest: ManifestFile) -> OffsetRange:
        return OffsetRange(manifest.body, manifest.size)

    def create_tracker(self, restriction: OffsetRange) -> OffsetRestrictionTracker:
        return OffsetRestrictionTracker(restriction)

    def split(self, manifest: ManifestFile, restriction: OffsetRange):
        return restriction.split(self._piece_bytes, self._piece_bytes // 4)

    def restriction_size(self, manifest: ManifestFile, restriction: OffsetRange) -> int:
        return restriction.size()

    def process(self, manifest: ManifestFile, tracker=_THIS_DOFNS_RESTRICTION):
        Metrics.counter(NAMESPACE, "manifest_pieces").inc()
        piece = tracker.current_restriction()
        read = read_piece(manifest, piece.start, piece.stop, self._config, tracker.try_claim)
        yield from _outputs(read)


@beam.typehints.with_output_types(RowBatch)
class _ReadCocoFn(beam.DoFn):
    """A COCO file, one JSON document, read whole by one worker."""

    def __init__(self, config: ReadConfig):
        self._config = config

    def process(self, manifest: ManifestFile):
        yield from _outputs(read_coco(manifest, self._config))


@beam.typehints.with_output_types(RowBatch)
class _ListFolderFn(beam.DoFn):
    def __init__(self, config: ReadConfig):
        self._config = config

    def process(self, folder: TreeFolder):
        yield from _outputs(list_folder(folder, self._config))


class ReadManifests(beam.PTransform):
    """Reads manifests (CSV, JSONL, Parquet, class-folder trees) into rows, errors and skipped
    files, on the workers: files in byte-range pieces, `gs://` trees a folder at a time.

    Args:
      manifests: the manifests as the launcher found them (transforms/manifest/sources.py); their
        numbers order them, which decides which of two rows with the same key is "first".
      config: the split and extra-feature settings every row is read with.
      piece_bytes: the size of the pieces a file is first split into (PIECE_BYTES).
    """

    def __init__(
        self, manifests: list[ManifestFile], config: ReadConfig, piece_bytes: int | None = None
    ):
        super().__init__()
        self._files = [m for m in manifests if m.kind not in ("tree", "coco")]
        self._documents = [m for m in manifests if m.kind == "coco"]
        self._trees = [tree_root(m.path, m.number) for m in manifests if m.kind == "tree"]
        self._config = config
        self._piece_bytes = piece_bytes or PIECE_BYTES

    def expand(self, pbegin):
        outputs = {"rows": [], "errors": [], "skipped": [], "negatives": []}
        reads = []
        if self._files:
            reads.append(
                pbegin
                | "ListManifestFiles" >> beam.Create(self._files)
                | "ReadPieces"
                >> beam.ParDo(_ReadPiecesFn(self._config, self._piece_bytes)).with_outputs(
                    "errors", "negatives", main="rows"
                )
            )
        if self._documents:
            reads.append(
                pbegin
                | "ListCocoFiles" >> beam.Create(self._documents)
                | "ReadCocoFiles"
                >> beam.ParDo(_ReadCocoFn(self._config)).with_outputs(
                    "errors", "negatives", main="rows"
                )
            )
        for read in reads:
            for tag in ("rows", "errors", "negatives"):
                outputs[tag].append(read[tag])
        if self._trees:
            for level in self._list_trees(pbegin):
                for tag in ("rows", "errors", "skipped"):
                    outputs[tag].append(level[tag])
        return {
            tag: collections | f"Collect{tag.title()}" >> beam.Flatten(pipeline=pbegin.pipeline)
            for tag, collections in outputs.items()
        }

    def _list_trees(self, pbegin):
        """Class-folder trees, listed a level at a time: the folders of a level are spread
        over the workers (Reshuffle) before they are listed."""
        folders, levels = pbegin | "ListTreeRoots" >> beam.Create(self._trees), []
        for depth in range(TREE_DEPTH + 1):
            if depth:
                folders = folders | f"SpreadFolders{depth}" >> beam.Reshuffle()
            level = folders | f"ListFolders{depth}" >> beam.ParDo(
                _ListFolderFn(self._config)
            ).with_outputs("folders", "errors", "skipped", main="rows")
            folders = level.folders
            levels.append(level)
        return levels


class _PlanStatsFn(beam.CombineFn):
    def __init__(self, counts: ShardCounts):
        self._counts = counts

    def create_accumulator(self):
        return PlanAccumulator(self._counts, sample_every_split=True)

    def add_input(self, accumulator, batch):
        for row in batch.rows:
            accumulator.add(row)
        return accumulator

    def merge_accumulators(self, accumulators):
        merged, *rest = accumulators
        for accumulator in rest:
            merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator.stats()


@beam.ptransform_fn
def PlanDataset(rows, config: PlanConfig, progress_dir: str | None):
    """All rows → one DatasetPlan: label ids and each split's shard count (files over
    `config.max_file_bytes` weigh nothing in a split's size: they become error rows), and
    whether its records hold objects."""
    return (
        rows
        | "CollectStats" >> beam.CombineGlobally(_PlanStatsFn(config.counts))
        | "DecideShards" >> beam.Map(decide_plan, config, progress_dir)
    )


def _digest_rows(batch: RowBatch, max_file_bytes: int):
    for row in batch.rows:
        yield content_digest(row, max_file_bytes), row


def _keep_first(digest_rows):
    kept, errors = keep_first(list(digest_rows[1]))
    yield from kept
    yield from map(_count_error, errors)


@beam.ptransform_fn
def DropDuplicateContent(batches, max_file_bytes: int):
    """Rows whose image bytes repeat an earlier row's become errors (reads every image once
    more, none over `max_file_bytes`; only digests and rows cross the shuffle). Returns
    {"rows": RowBatch, "errors"}."""
    kept = (
        batches
        | "DigestContent" >> beam.FlatMap(_digest_rows, max_file_bytes)
        | "GroupByContent" >> beam.GroupByKey()
        | "KeepFirst" >> beam.FlatMap(_keep_first).with_outputs("errors", main="rows")
    )
    rebatched = (
        kept.rows  # how many rows a batch holds changes nothing downstream
        | "Rebatch" >> beam.BatchElements(min_batch_size=1, max_batch_size=ROWS_PER_BATCH)
        | "ToRowBatch" >> beam.Map(lambda rows: RowBatch(tuple(rows)))
    )
    return {"rows": rebatched, "errors": kept.errors}


# A shard's piece as a grouping key: (split, shard index, shard count, piece index, pieces).
PieceKey = tuple[str, int, int, int, int]


@beam.typehints.with_output_types(tuple[PieceKey, RowBatch])
class _AssignShardFn(beam.DoFn):
    def process(self, batch, plan):
        by_shard, errors = group_by_shard(batch.rows, plan)
        yield from map(_count_error, errors)
        for shard, rows in by_shard.items():
            pieces = plan.pieces_of(shard.split)
            by_piece: dict[int, list[ManifestRow]] = {}
            for row in rows:
                by_piece.setdefault(piece_of(row.key, pieces) if pieces > 1 else 0, []).append(row)
            for piece, piece_rows in by_piece.items():
                yield (*shard, piece, pieces), RowBatch(tuple(piece_rows))


@beam.ptransform_fn
def AssignShards(rows, plan):
    """Split each batch by shard (and piece, for a shard written in pieces); rows whose label
    has no id become errors here, before the shuffle."""
    return rows | "KeyByShard" >> beam.ParDo(_AssignShardFn(), AsSingleton(plan)).with_outputs(
        "errors", main="keyed"
    )


def _all_pieces(plan):
    """One empty batch per planned shard piece, so one that gets no rows is still written."""
    for shard in all_shards(plan):
        pieces = plan.pieces_of(shard.split)
        for piece in range(pieces):
            yield (*shard, piece, pieces), RowBatch(())


@beam.typehints.with_output_types(ShardResult)
class _WriteShardFn(beam.DoFn):
    """Writes each shard as it comes, in this worker's process: the runner spreads the shards
    over its worker processes (transforms/write/shard_processes.py)."""

    def __init__(self, config: WriteConfig):
        self._config = config

    def setup(self):
        self._writer = ShardWriter()

    def process(self, keyed_batches, plan):
        (split, index, count, piece, pieces), batches = keyed_batches
        rows = [row for batch in batches for row in batch.rows]
        shard, part = ShardId(split, index, count), Piece(piece, pieces)
        task = shard_task(shard, rows, plan, self._config, piece=part)
        yield from _shard_outputs(self._writer.write(task))

    def teardown(self):
        self._writer.close()


def _shard_outputs(written: Iterable[ErrorRow | ShardResult]):
    """The writer's outputs as the step's: error rows to "errors", results counted."""
    for item in written:
        if isinstance(item, ErrorRow):
            yield _count_error(item)
        else:
            Metrics.counter(NAMESPACE, "records").inc(item.records)
            Metrics.counter(NAMESPACE, "bytes").inc(item.bytes)
            yield item


def _join_pieces(keyed_pieces, config: WriteConfig) -> ShardResult:
    _, pieces = keyed_pieces
    return join_staged(
        sorted(pieces, key=lambda part: part.piece.index), config.output, config.compress
    )


class WriteShards(beam.PTransform):
    """Groups rows by shard and writes every planned shard; a shard larger than the target size
    (`--num_shards` can ask for one) is written in pieces, by several workers at once, then its
    pieces are joined (on Cloud Storage, composed) into the one file: no shard is one
    all-or-nothing unit of work, and the bytes are those of the shard written whole
    (transforms/plan/sharding.py `piece_of`). Returns {"shards": ShardResult, "errors": ErrorRow}.

    Args:
      plan: the DatasetPlan side input (label ids, shard counts, pieces).
      config: output folder, image settings and compression of the shards.
    """

    def __init__(self, plan, config: WriteConfig):
        super().__init__()
        self._plan = plan
        self._config = config

    def expand(self, keyed_rows):
        every_piece = self._plan | "ListShards" >> beam.FlatMap(_all_pieces)
        written = (
            (keyed_rows, every_piece)
            | "AddEmptyShards" >> beam.Flatten()
            | "GroupRowsByShard" >> beam.GroupByKey()
            | "WriteShard"
            >> beam.ParDo(_WriteShardFn(self._config), AsSingleton(self._plan)).with_outputs(
                "errors", main="shards"
            )
        )
        whole, pieces = written.shards | "WholeOrPiece" >> beam.Partition(
            lambda result, _: int(result.piece.count > 1), 2
        )
        joined = (
            pieces
            | "KeyPieceByShard" >> beam.Map(lambda part: ((part.split, part.index), part))
            | "GroupPieces" >> beam.GroupByKey()
            | "JoinPieces" >> beam.Map(_join_pieces, self._config).with_output_types(ShardResult)
        )
        shards = (whole, joined) | "EveryShard" >> beam.Flatten().with_output_types(ShardResult)
        return {"shards": shards, "errors": written.errors}


@beam.typehints.with_output_types(ErrorCounts)
class _CountErrorsFn(beam.CombineFn):
    """Error rows → one ErrorCounts; a Counter of (split, reason) per worker, merged."""

    def create_accumulator(self):
        return Counter()

    def add_input(self, counts, error):
        counts[counted_as(error)] += 1
        return counts

    def merge_accumulators(self, accumulators):
        merged, *rest = accumulators
        for counts in rest:
            merged.update(counts)
        return merged

    def extract_output(self, counts):
        return ErrorCounts.of(counts)


def _key_by_file(error: ErrorRow, counts: ErrorCounts, rows_per_file: int):
    count = error_file_count(counts.total, rows_per_file)
    return (file_of(error, count), count), error


def _every_error_file(counts: ErrorCounts, rows_per_file: int):
    """One empty entry per errors file, so a file that gets no rows is still written."""
    count = error_file_count(counts.total, rows_per_file)
    for index in range(count):
        yield (index, count), None


def _write_error_file(file_errors, staging: str) -> ErrorFileResult:
    (index, count), errors = file_errors
    return write_error_file(staging, index, count, (e for e in errors if e is not None))


class WriteErrors(beam.PTransform):
    """Counts the error rows per split and reason, and writes them as errors files into the
    run's staging folder, each file by one worker: no step holds every error row.

    Returns {"files": an ErrorFileResult per file, "counts": one ErrorCounts}.

    Args:
      staging: the run's staging folder; the commit step moves the files into the version.
      rows_per_file: about how many rows a file holds (their count decides how many files).
    """

    def __init__(self, staging: str, rows_per_file: int):
        super().__init__()
        self._staging = staging
        self._rows_per_file = rows_per_file

    def expand(self, errors):
        counts = errors | "CountErrors" >> beam.CombineGlobally(_CountErrorsFn())
        keyed = errors | "KeyByFile" >> beam.Map(
            _key_by_file, AsSingleton(counts), self._rows_per_file
        )
        every_file = counts | "ListErrorFiles" >> beam.FlatMap(
            _every_error_file, self._rows_per_file
        )
        files = (
            (keyed, every_file)
            | "AddEmptyFiles" >> beam.Flatten()
            | "GroupByFile" >> beam.GroupByKey()
            | "WriteErrorFile"
            >> beam.Map(_write_error_file, self._staging).with_output_types(ErrorFileResult)
        )
        return {"files": files, "counts": counts}
