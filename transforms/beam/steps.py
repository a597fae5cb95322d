"""What the Beam steps of a conversion share, and the element shapes between them.

Each step is a thin wrapper over the pure modules of transforms/, in a module of this package
named for its stage; conversion.py runs them in the order of transforms/stages.py. Element shapes
between steps (a RowBatch holds up to ROWS_PER_BATCH ManifestRows):
    ReadManifests (manifests.py)
                    -> {"rows": RowBatch, "errors": ErrorRow, "skipped": SkippedFile,
                        "negatives": DroppedNegative}
    PlanDataset (plan.py)   RowBatch -> DatasetPlan (one element; a side input downstream)
    DropDuplicateContent (plan.py, --dedup, after the plan has counted every row)
                    RowBatch -> {"rows": RowBatch, "errors": ErrorRow}
    RefreshRows (refresh.py, --incremental)
                    RowBatch -> {"rows": RowBatch (to convert), "layout": RefreshLayout (one
                                 element: its write plan is AssignShards' and WriteShards'),
                                 "carried": (published shard file, ShardResult)}
    AssignShards (plan.py)  RowBatch -> {"keyed": (PieceKey, RowBatch of that piece's rows),
                                         "errors": ErrorRow}   (pieces is 1 for most shards)
    WriteShards (shards.py) -> {"shards": ShardResult, "errors": ErrorRow}   (pieces joined)
    WriteErrors (error_files.py)
                    ErrorRow -> {"files": ErrorFileResult, "counts": ErrorCounts (one element)}
Only manifest rows cross the GroupByKey in WriteShards, and then only ShardResults of pieces;
image bytes are read after it. Error rows cross one more, grouped by errors file.
"""

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from tfrecord_pipeline.transforms.beam.coders import RowBatch
from tfrecord_pipeline.transforms.errors import ErrorRow

NAMESPACE = "tfrecord_pipeline"
# Rows per element between steps: large enough that Beam's per-element cost vanishes, small
# enough that an element stays around a megabyte.
ROWS_PER_BATCH = 1000

# A shard's piece as a grouping key: (split, shard index, shard count, piece index, pieces).
PieceKey = tuple[str, int, int, int, int]


def error_output(error: ErrorRow) -> TaggedOutput:
    """An error row as a step's "errors" output, counted by its reason."""
    Metrics.counter(NAMESPACE, f"error_{error.reason.value}").inc()
    return TaggedOutput("errors", error)


def as_row_batches(rows):
    """Loose ManifestRows (after a shuffle) in RowBatches again: how many rows a batch holds
    changes nothing downstream."""
    return (
        rows
        | "Rebatch" >> beam.BatchElements(min_batch_size=1, max_batch_size=ROWS_PER_BATCH)
        | "ToRowBatch" >> beam.Map(lambda batch: RowBatch(tuple(batch)))
    )
