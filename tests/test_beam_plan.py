"""transforms/beam/plan.py: rows keyed by their shard's piece (the DoFn called directly), and
--dedup's step on a TestPipeline."""

import shutil

import apache_beam as beam
import pytest
from apache_beam.pvalue import TaggedOutput
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from conftest import encode, photo, write_manifest

from tfrecord_pipeline.transforms.beam.coders import RowBatch
from tfrecord_pipeline.transforms.beam.manifests import ReadManifests
from tfrecord_pipeline.transforms.beam.plan import (
    AssignShards,
    DropDuplicateContent,
    _AssignShardFn,
)
from tfrecord_pipeline.transforms.errors import Reason
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig, row_position
from tfrecord_pipeline.transforms.manifest.sources import check_manifests
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.sharding import piece_of, shard_for


def _row(key: str, label: str = "cat", position: int = 0, uri: str = "x.jpg") -> ManifestRow:
    return ManifestRow(key, uri, label, "train", (), "m.csv", row_position(0, position))


def test_rows_are_keyed_by_shard_and_piece_and_unknown_labels_are_errors():
    plan = DatasetPlan(LabelMap(("cat",)), (("train", 41),), (("train", 2),), (("train", 3),))
    rows = [_row(f"cat/{n}") for n in range(40)] + [_row("dog/0", "dog")]

    outputs = list(_AssignShardFn().process(RowBatch(tuple(rows)), plan))

    errors = [output.value for output in outputs if isinstance(output, TaggedOutput)]
    assert [(error.key, error.reason) for error in errors] == [("dog/0", Reason.UNKNOWN_LABEL)]
    keyed = [output for output in outputs if not isinstance(output, TaggedOutput)]
    assert sum(len(batch.rows) for _, batch in keyed) == 40
    for (split, index, count, piece, pieces), batch in keyed:
        for row in batch.rows:
            assert (split, index, count) == shard_for(row.key, "train", 2)
            assert (piece, pieces) == (piece_of(row.key, 3), 3)


def test_rows_whose_bytes_repeat_an_earlier_rows_become_errors(tmp_path):
    first = tmp_path / "a.jpg"
    first.write_bytes(encode(photo("rocket.jpg")))
    shutil.copy(first, tmp_path / "b.jpg")  # the same bytes, another name
    (tmp_path / "c.jpg").write_bytes(encode(photo("coffee.png")))
    rows = [
        _row(f"cat/{name}", position=n, uri=str(tmp_path / f"{name}.jpg"))
        for n, name in enumerate("abc")
    ]

    with BeamTestPipeline() as p:
        unique = p | beam.Create([RowBatch(tuple(rows))]) | DropDuplicateContent(1 << 20)
        kept = unique["rows"] | beam.FlatMap(lambda batch: [row.key for row in batch.rows])
        assert_that(kept, equal_to(["cat/a", "cat/c"]))
        errors = unique["errors"] | beam.Map(lambda error: (error.key, error.reason))
        assert_that(errors, equal_to([("cat/b", Reason.DUPLICATE_CONTENT)]), "Errors")


@pytest.mark.slow
def test_read_manifests_and_assign_shards(tmp_path):
    manifest = write_manifest(
        tmp_path / "m.csv",
        [
            {"image_uri": "a.jpg", "label": "cat"},
            {"image_uri": "b.jpg", "label": "dog"},
            {"image_uri": "c.jpg", "label": ""},
        ],
    )
    plan = DatasetPlan(LabelMap(("cat",)), (("train", 2),), (("train", 4),))
    with BeamTestPipeline() as p:
        read = p | ReadManifests(check_manifests([str(manifest)], ReadConfig()), ReadConfig())
        keyed = read["rows"] | AssignShards(p | "Plan" >> beam.Create([plan]))
        shards = keyed.keyed | beam.FlatMap(lambda kv: [(kv[0], row.key) for row in kv[1].rows])
        assert_that(shards, equal_to([((*shard_for("a.jpg", "train", 4), 0, 1), "a.jpg")]))
        reasons = (
            (read["errors"], keyed.errors) | beam.Flatten() | beam.Map(lambda e: e.reason.value)
        )
        assert_that(reasons, equal_to(["bad_label", "unknown_label"]), label="Reasons")
