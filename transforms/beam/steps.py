"""The Beam steps of a conversion, in the order of the data path, and what they all share.

Each step is a thin wrapper over the pure modules of transforms/, in a module of this package
named for its stage; pipeline/runners/beam_pipeline.py wires them. Element shapes between steps
(a RowBatch holds up to ROWS_PER_BATCH ManifestRows):
    ReadManifests (manifests.py)
                    -> {"rows": RowBatch, "errors": ErrorRow, "skipped": SkippedFile,
                        "negatives": DroppedNegative}
    DropDuplicateContent (plan.py, --dedup) -> {"rows": RowBatch, "errors": ErrorRow}
    PlanDataset (plan.py)   -> DatasetPlan    (one element; a side input downstream)
    AssignShards (plan.py)  -> (PieceKey, RowBatch of that piece's rows)
                                              (+ "errors"; pieces is 1 for most shards)
    WriteShards (shards.py) -> {"shards": ShardResult, "errors": ErrorRow}   (pieces joined)
    WriteErrors (error_files.py)
                    ErrorRow -> {"files": ErrorFileResult, "counts": ErrorCounts (one element)}
Only manifest rows cross the GroupByKey in WriteShards, and then only ShardResults of pieces;
image bytes are read after it. Error rows cross one more, grouped by errors file.
"""

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import TaggedOutput

from transforms.beam.coders import RowBatch, RowBatchCoder
from transforms.errors import ErrorRow

NAMESPACE = "tfrecord_pipeline"
# Rows per element between steps: large enough that Beam's per-element cost vanishes, small
# enough that an element stays around a megabyte.
ROWS_PER_BATCH = 1000
# Coded as plain tuples, with a size estimate that codes nothing (transforms/beam/coders.py).
beam.coders.registry.register_coder(RowBatch, RowBatchCoder)

# A shard's piece as a grouping key: (split, shard index, shard count, piece index, pieces).
PieceKey = tuple[str, int, int, int, int]


def error_output(error: ErrorRow) -> TaggedOutput:
    """An error row as a step's "errors" output, counted by its reason."""
    Metrics.counter(NAMESPACE, f"error_{error.reason.value}").inc()
    return TaggedOutput("errors", error)
