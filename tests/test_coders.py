"""The coder Beam uses for batches of manifest rows: exact round trips, a size estimate in
proportion, and the one Beam picks for every step that carries rows."""

import pickle

from apache_beam.coders import typecoders
from apache_beam.typehints.native_type_compatibility import convert_to_beam_type

from tfrecord_pipeline.transforms.beam.coders import RowBatch, RowBatchCoder
from tfrecord_pipeline.transforms.beam.steps import PieceKey
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow


def _batch(rows: int, key: str = "") -> RowBatch:
    return RowBatch(
        tuple(
            ManifestRow(
                key or f"images/cat/{i:06d}.jpg",
                f"images/cat/{i:06d}.jpg",
                "cat",
                "train",
                (("width", 3 * i), ("score", 0.5), ("tag", "é")),
                "m.csv",
                1 << 32 | i,
                "/data/",
            )
            for i in range(rows)
        )
    )


def test_a_batch_decodes_to_equal_rows_of_the_row_type():
    coder = RowBatchCoder()
    for batch in (_batch(0), _batch(1), _batch(1000), _batch(3, key="same key")):
        decoded = coder.decode(coder.encode(batch))
        assert decoded == batch and all(type(row) is ManifestRow for row in decoded.rows)
        assert [row.image_uri for row in decoded.rows] == [row.image_uri for row in batch.rows]


def test_the_size_estimate_is_near_the_coded_size_without_coding():
    coder = RowBatchCoder()
    for batch in (_batch(1000), _batch(1000, key="a key the manifest gives, longer")):
        coded = len(coder.encode(batch))
        assert 0.5 * coded < coder.estimate_size(batch) < 2 * coded
    assert len(coder.encode(_batch(1000))) < len(pickle.dumps(_batch(1000)))


def test_beam_codes_the_steps_that_carry_rows_with_it():
    """The output types ReadManifests and AssignShards declare, as Beam reads them."""
    assert isinstance(typecoders.registry.get_coder(RowBatch), RowBatchCoder)
    keyed = typecoders.registry.get_coder(convert_to_beam_type(tuple[PieceKey, RowBatch]))
    assert isinstance(keyed.coders()[1], RowBatchCoder)
