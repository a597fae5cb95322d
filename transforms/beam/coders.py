"""RowBatch, the element that carries manifest rows between steps, and how Beam codes it.

Beam codes an element each time it crosses a step boundary, and, for the size metrics of every
step's output, codes the first ten elements and about ten in each N after them once more
(`OutputCounter` in Beam's opcounters.py): with rows in batches of a thousand, nearly every
batch of a run is coded several times at each step. Its default for a NamedTuple it does not
know is a pickle, which calls the row's Python `__getnewargs__` for every row. A batch
pickled as plain tuples calls no Python per row, and its size is estimated from its first row,
without coding it.
"""

import pickle
from typing import NamedTuple

import apache_beam as beam

from tfrecord_pipeline.transforms.manifest.rows import ManifestRow

# A row's bytes beside its image path and key: its label, split and position (manifest path,
# folder and label strings are shared by a batch's rows, and pickled once).
_ROW_BYTES = 24


class RowBatch(NamedTuple):
    """Manifest rows that travel between pipeline steps together.

    Beam's cost is per element (coding, bookkeeping, a pickle call for a row type it does not
    know), so rows move in batches: one element, one pickle, for hundreds of rows.
    """

    rows: tuple[ManifestRow, ...]


class RowBatchCoder(beam.coders.Coder):
    """A RowBatch as a pickle of its rows as plain tuples (a value coder: rows never key a
    shuffle, so its bytes need not be deterministic)."""

    def encode(self, batch: RowBatch) -> bytes:
        return pickle.dumps(tuple(map(tuple, batch.rows)), pickle.HIGHEST_PROTOCOL)

    def decode(self, encoded: bytes) -> RowBatch:
        return RowBatch(tuple(map(ManifestRow._make, pickle.loads(encoded))))

    def estimate_size(self, batch: RowBatch) -> int:
        """Beam's size metrics only: the first row's size, times the rows."""
        if not batch.rows:
            return 1
        first = batch.rows[0]
        key = len(first.key) if first.key != first.image else 0
        return len(batch.rows) * (_ROW_BYTES + len(first.image) + key)

    def to_type_hint(self):
        return RowBatch


# Beam picks this coder for every RowBatch, a shuffle's values included.
beam.coders.registry.register_coder(RowBatch, RowBatchCoder)
