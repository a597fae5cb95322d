"""ReadManifests: manifests and class-folder trees read into rows on the workers.

    files: ManifestFile -> pieces of it (an OffsetRange restriction) -> rows
    COCO files: ManifestFile -> rows (one JSON document, read whole)
    trees: TreeFolder -> rows, and subfolders to list at the next level
Every read yields {"rows": RowBatch, "errors": ErrorRow} and, from files, "negatives":
DroppedNegative, from trees, "skipped": SkippedFile; the step flattens them tag by tag.
"""

import apache_beam as beam
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.core import RestrictionProvider

from tfrecord_pipeline.transforms.beam.coders import RowBatch
from tfrecord_pipeline.transforms.beam.steps import NAMESPACE, ROWS_PER_BATCH, error_output
from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.manifest.rows import DroppedNegative, ManifestRow, ReadConfig
from tfrecord_pipeline.transforms.manifest.sources import (
    WHOLE_KINDS,
    ManifestFile,
    read_all,
    read_piece,
)
from tfrecord_pipeline.transforms.manifest.trees import (
    TREE_DEPTH,
    TreeFolder,
    list_folder,
    tree_root,
)

# Bytes of a manifest file per piece read by one worker: about a million rows, a piece big
# enough to amortise its start and small enough to spread; a runner may split a piece further
# while it is read.
PIECE_BYTES = 64 << 20
_FILE_OUTPUTS = ("rows", "errors", "negatives")
_TREE_OUTPUTS = ("rows", "errors", "skipped")


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
            yield error_output(item)
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
class ReadWholeFn(beam.DoFn):
    """A COCO file (one JSON document) or an archive, read whole by one worker: archives are
    the unit of parallel work."""

    def __init__(self, config: ReadConfig):
        self._config = config

    def process(self, manifest: ManifestFile):
        yield from _outputs(read_all(manifest, self._config))


@beam.typehints.with_output_types(RowBatch)
class _ListFolderFn(beam.DoFn):
    def __init__(self, config: ReadConfig):
        self._config = config

    def process(self, folder: TreeFolder):
        yield from _outputs(list_folder(folder, self._config))


class ReadManifests(beam.PTransform):
    """Reads manifests (CSV, JSONL, Parquet, COCO, class-folder trees) into rows, errors,
    skipped files and dropped negatives, on the workers: files in byte-range pieces, a COCO
    file whole, `gs://` trees a folder at a time.

    Args:
      manifests: the manifests as the launcher found them (transforms/manifest/sources.py); their
        numbers order them, which decides which of two rows with the same key is "first".
      config: what every row is read with (transforms/manifest/rows.py `ReadConfig`).
      piece_bytes: the size of the pieces a file is first split into (PIECE_BYTES).
    """

    def __init__(
        self, manifests: list[ManifestFile], config: ReadConfig, piece_bytes: int | None = None
    ):
        super().__init__()
        self._files = [m for m in manifests if m.kind not in WHOLE_KINDS]
        self._documents = [m for m in manifests if m.kind in ("coco", "archive", "arrow")]
        self._trees = [tree_root(m.path, m.number) for m in manifests if m.kind == "tree"]
        self._config = config
        self._piece_bytes = piece_bytes or PIECE_BYTES

    def expand(self, pbegin):
        reads = [(read, _FILE_OUTPUTS) for read in self._read_files(pbegin)]
        reads += [(level, _TREE_OUTPUTS) for level in self._list_trees(pbegin)]
        return {
            tag: [read[tag] for read, tags in reads if tag in tags]
            | f"Collect{tag.title()}" >> beam.Flatten(pipeline=pbegin.pipeline)
            for tag in ("rows", "errors", "skipped", "negatives")
        }

    def _read_files(self, pbegin) -> list:
        """Manifest files read in pieces, and COCO files whole."""
        reads = []
        if self._files:
            reads.append(
                pbegin
                | "ListManifestFiles" >> beam.Create(self._files)  # ManifestFile
                | "ReadPieces"
                >> beam.ParDo(_ReadPiecesFn(self._config, self._piece_bytes)).with_outputs(
                    "errors", "negatives", main="rows"
                )
            )
        if self._documents:
            reads.append(
                pbegin
                | "ListWholeFiles" >> beam.Create(self._documents)  # ManifestFile
                | "ReadWholeFiles"
                >> beam.ParDo(ReadWholeFn(self._config)).with_outputs(
                    "errors", "negatives", main="rows"
                )
            )
        return reads

    def _list_trees(self, pbegin) -> list:
        """Class-folder trees, listed a level at a time: the folders of a level are spread
        over the workers (Reshuffle) before they are listed."""
        if not self._trees:
            return []
        folders, levels = pbegin | "ListTreeRoots" >> beam.Create(self._trees), []
        for depth in range(TREE_DEPTH + 1):
            if depth:
                folders = folders | f"SpreadFolders{depth}" >> beam.Reshuffle()  # TreeFolder
            level = folders | f"ListFolders{depth}" >> beam.ParDo(
                _ListFolderFn(self._config)
            ).with_outputs("folders", "errors", "skipped", main="rows")
            folders = level.folders
            levels.append(level)
        return levels
