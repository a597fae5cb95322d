"""transforms/beam/shards.py: the empty piece of every planned shard, and the shard-writing
DoFn called directly (setup, process, teardown)."""

import apache_beam as beam
import pytest
from apache_beam.pvalue import TaggedOutput
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from conftest import make_images

from tfrecord_pipeline.transforms.beam.coders import RowBatch
from tfrecord_pipeline.transforms.beam.plan import AssignShards
from tfrecord_pipeline.transforms.beam.shards import WriteShards, _all_pieces, _WriteShardFn
from tfrecord_pipeline.transforms.errors import Reason
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.sharding import ShardId
from tfrecord_pipeline.transforms.progress import SILENT
from tfrecord_pipeline.transforms.write.formats import ShardFormat
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult, WriteConfig, write_shard

FORMATS = [ShardFormat(), ShardFormat(compression="gzip"), ShardFormat("array_record")]


def test_every_planned_piece_gets_an_empty_batch():
    plan = DatasetPlan(LabelMap(("cat",)), (), (("train", 2), ("test", 1)), (("train", 3),))
    keys = [key for key, batch in _all_pieces(plan) if batch == RowBatch(())]
    assert keys == [
        *(("train", index, 2, piece, 3) for index in range(2) for piece in range(3)),
        ("test", 0, 1, 0, 1),
    ]


def test_the_write_step_writes_a_shard_and_tags_its_error_rows(tmp_path):
    images = make_images(tmp_path, per_class=2)
    rows = [
        ManifestRow(
            f"k{n}", str(tmp_path / image["image_uri"]), image["label"], "train", (), "m", n
        )
        for n, image in enumerate(images)
    ]
    missing = rows[0]._replace(key="gone", image=str(tmp_path / "gone.jpg"))
    labels = LabelMap(tuple(sorted({row.label for row in rows})))
    plan = DatasetPlan(labels, (("train", len(rows) + 1),), (("train", 1),))
    write = _WriteShardFn(WriteConfig(str(tmp_path / "staging")), SILENT)

    write.setup()
    try:
        batches = [RowBatch(tuple(rows[:3])), RowBatch((*rows[3:], missing))]
        outputs = list(write.process((("train", 0, 1, 0, 1), batches), plan))
    finally:
        write.teardown()

    *errors, result = outputs
    assert [(error.tag, error.value.key, error.value.reason) for error in errors] == [
        ("errors", "gone", Reason.MISSING_FILE)
    ]
    assert not isinstance(result, TaggedOutput) and isinstance(result, ShardResult)
    assert (result.split, result.index, result.records) == ("train", 0, len(rows))
    assert (tmp_path / "staging" / result.staged).stat().st_size == result.bytes


@pytest.mark.slow
@pytest.mark.parametrize("shard_format", FORMATS, ids=str)
def test_a_shard_written_in_pieces_is_the_shard_written_whole(tmp_path, shard_format):
    """Pieces written apart (by other workers, in any order) and joined give the shard's
    bytes, its index, its rows file and its counts, as one writer would."""
    images = make_images(tmp_path, per_class=6)
    rows = [
        ManifestRow(
            f"k{n}", str(tmp_path / image["image_uri"]), image["label"], "train", (), "m", n
        )
        for n, image in enumerate(images)
    ]
    rows.append(rows[3]._replace(position=99))  # a duplicate key: an error in its piece
    labels = LabelMap(tuple(sorted({row.label for row in rows})))
    staging = tmp_path / "staging"
    index = shard_format.concatenates  # DALI's index: uncompressed TFRecord only
    config = WriteConfig(str(staging), shard_format=shard_format, write_index=index)
    *whole_errors, whole = write_shard(ShardId("train", 0, 1), rows, labels, config)
    plan = DatasetPlan(labels, (("train", len(rows)),), (("train", 1),), (("train", 4),))

    def same_as_whole(results):
        [joined] = results
        assert joined.piece == (0, 1)
        assert (staging / joined.staged).read_bytes() == (staging / whole.staged).read_bytes()
        for suffix in [".rows", *([".idx"] if index else [])]:
            text = (staging / (joined.staged + suffix)).read_text()
            assert text == (staging / (whole.staged + suffix)).read_text()
        assert joined._replace(staged=whole.staged) == whole

    with BeamTestPipeline() as p:
        batches = p | "Rows" >> beam.Create([RowBatch(tuple(rows))])
        plan_input = p | "Plan" >> beam.Create([plan])
        shards = (batches | AssignShards(plan_input)).keyed | WriteShards(plan_input, config)
        assert_that(shards["shards"], same_as_whole)
        errors = shards["errors"] | beam.Map(lambda e: (e.key, e.reason.value))
        assert_that(errors, equal_to([(e.key, e.reason.value) for e in whole_errors]), "Errors")
    assert len(list(staging.glob("train-*.rows"))) == 1 + 4 + 1  # whole, 4 pieces, joined
