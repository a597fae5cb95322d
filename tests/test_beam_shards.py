"""transforms/beam/shards.py: the empty piece of every planned shard, and the shard-writing
DoFn called directly (setup, process, teardown)."""

from apache_beam.pvalue import TaggedOutput
from conftest import make_images

from transforms.beam.coders import RowBatch
from transforms.beam.shards import _all_pieces, _WriteShardFn
from transforms.errors import Reason
from transforms.manifest.labels import LabelMap
from transforms.manifest.rows import ManifestRow
from transforms.plan.dataset import DatasetPlan
from transforms.write.shard_writer import ShardResult, WriteConfig


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
    write = _WriteShardFn(WriteConfig(str(tmp_path / "staging")))

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
