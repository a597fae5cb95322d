"""transforms/plan/dataset.py: the dataset plan (label ids, shard counts from sampled sizes,
pieces) from rows, and rows grouped by their shard."""

import pytest
from conftest import manifest_row

from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.plan.dataset import (
    LabelSource,
    PlanAccumulator,
    PlanConfig,
    make_plan,
)
from tfrecord_pipeline.transforms.plan.sharding import (
    MAX_PIECES,
    ShardCounts,
    parse_shard_counts,
)


def _config(counts: ShardCounts, target_shard_mb: float) -> PlanConfig:
    return PlanConfig(LabelSource(), counts, target_shard_mb, max_file_bytes=1 << 30)


def test_plan_counts_shards_from_sampled_sizes():
    accumulators = [PlanAccumulator(), PlanAccumulator()]
    for i in range(300):
        accumulators[i % 2].add(manifest_row(f"a/{i}", "train" if i % 3 else "test", f"f{i}"))
    stats = accumulators[0].merge(accumulators[1]).stats()
    plan = make_plan(stats, _config(ShardCounts(), 1.0), lambda uri: 100 * 1024)
    assert dict(plan.rows) == {"test": 100, "train": 200}
    # 200 rows × 100 KiB ≈ 19.5 MiB at 1 MiB per shard → 20 shards.
    assert dict(plan.shards) == {"test": 10, "train": 20}
    fixed = make_plan(stats, _config(parse_shard_counts("train=3"), 1.0), lambda uri: 0)
    assert dict(fixed.shards) == {"test": 1, "train": 3}


def test_with_write_index_shards_sized_by_bytes_are_few_enough_to_hold_two_records_each():
    """The PyTorch tfrecord package's index reader fails on a shard of 0 or 1 records: with
    --write_index (least_records 2) a split sized by bytes gets no more shards than its rows
    are unlikely to leave one of fewer than 2 in; a count given stays as given."""
    accumulator = PlanAccumulator()
    for i in range(40):
        accumulator.add(manifest_row(f"a/{i}", "train", f"f{i}"))
    stats = accumulator.stats()
    indexed = _config(ShardCounts(), 1.0)._replace(least_records=2)
    assert dict(make_plan(stats, _config(ShardCounts(), 1.0), lambda uri: 1 << 20).shards) == {
        "train": 40
    }
    assert dict(make_plan(stats, indexed, lambda uri: 1 << 20).shards) == {"train": 6}
    given = indexed._replace(counts=parse_shard_counts("train=30"))
    assert dict(make_plan(stats, given, lambda uri: 1 << 20).shards) == {"train": 30}


def test_plan_samples_only_the_splits_sized_by_bytes():
    counts = parse_shard_counts("train=3")
    accumulator = PlanAccumulator(counts)
    for i in range(300):
        accumulator.add(manifest_row(f"a/{i}", "train" if i % 3 else "test", f"f{i}"))
    stats = accumulator.stats()
    assert dict(stats.samples).keys() == {"test"}
    plan = make_plan(stats, _config(counts, 1.0), lambda uri: 100 * 1024)
    assert dict(plan.shards) == {"test": 10, "train": 3}


def test_shards_that_num_shards_makes_large_are_planned_in_pieces():
    counts = parse_shard_counts("train=2")
    accumulator = PlanAccumulator(counts, sample_every_split=True)
    for i in range(300):
        accumulator.add(manifest_row(f"a/{i}", "train" if i % 3 else "test", f"f{i}"))
    plan = make_plan(accumulator.stats(), _config(counts, 1.0), lambda uri: 100 * 1024)
    # train: 200 rows × 100 KiB in 2 shards ≈ 9.8 MiB a shard → 10 pieces of ≤ 1 MiB; test
    # is sized by bytes, so its shards are already about 1 MiB: whole.
    assert dict(plan.shards) == {"test": 10, "train": 2}
    assert plan.pieces == (("train", 10),)
    assert (plan.pieces_of("train"), plan.pieces_of("test")) == (10, 1)
    huge = make_plan(accumulator.stats(), _config(counts, 0.001), lambda uri: 100 * 1024)
    assert huge.pieces_of("train") == MAX_PIECES  # one compose request joins them


def test_plan_does_not_depend_on_bundle_boundaries():
    rows = [manifest_row(f"a/{i}", uri=f"f{i}") for i in range(500)]
    one = PlanAccumulator()
    for row in rows:
        one.add(row)
    parts = [PlanAccumulator() for _ in range(7)]
    for i, row in enumerate(reversed(rows)):
        parts[i % 7].add(row)
    merged = parts[0]
    for part in parts[1:]:
        merged.merge(part)
    assert one.stats() == merged.stats()


@pytest.mark.parametrize("text", ["0", "x", "train=0", "Train=2", "100000", f"{'s' * 65}=2"])
def test_bad_shard_counts(text):
    with pytest.raises(UserError):
        parse_shard_counts(text)


def test_labels_past_the_limit_are_refused_as_counted_and_never_held():
    accumulator = PlanAccumulator(max_labels=5)
    for index in range(5):
        accumulator.add(manifest_row(f"class{index}/a"))
    with pytest.raises(UserError, match=r"^column 'label' has over 5 distinct labels: .*--max_l"):
        accumulator.add(manifest_row("class5/a"))
    halves = [PlanAccumulator(max_labels=5), PlanAccumulator(max_labels=5)]
    for index in range(6):  # three labels each: merged, six
        halves[index % 2].add(manifest_row(f"class{index}/a"))
    with pytest.raises(UserError, match="over 5 distinct labels"):
        halves[0].merge(halves[1])


def test_tags_and_objects_categories_are_not_taken_for_labels_one_a_row():
    """600 rows of 3 tags over 1,201 names, and a COCO file's declared categories (LVIS has
    hundreds of a few objects each), were refused as 'nearly one a row'."""
    tagged = PlanAccumulator()
    for index in range(600):
        tags = tuple(f"tag{(3 * index + n) % 1_201}" for n in range(3))
        tagged.add(manifest_row(f"x/{index}")._replace(label=tags))
    assert len(make_plan(tagged.stats(), _config(ShardCounts(1), 1.0), len).labels.names) == 1_201
    single = PlanAccumulator()
    for index in range(1_100):
        single.add(manifest_row(f"id{index}/{index}"))
    detection = _config(ShardCounts(1), 1.0)._replace(detection=True)
    assert len(make_plan(single.stats(), detection, len).labels.names) == 1_100


def test_max_labels_counts_the_labels_a_refresh_inherits_too():
    """An --incremental run with --max_labels 20 published the 1,110 labels it carried."""
    accumulator = PlanAccumulator(max_labels=20)
    accumulator.add(manifest_row("new/0"))
    published = LabelMap(tuple(f"old{n}" for n in range(30)), 0)
    config = _config(ShardCounts(1), 1.0)._replace(max_labels=20)
    inheriting = config._replace(labels=LabelSource(inherited=published))
    with pytest.raises(UserError, match="over 20 distinct labels"):
        make_plan(accumulator.stats(), inheriting, len)
    assert make_plan(accumulator.stats(), config, len).labels.names == ("new",)


def test_labels_nearly_one_a_row_are_refused_unless_max_labels_is_given():
    accumulator = PlanAccumulator()
    for index in range(1_100):  # 1,001 labels in 1,100 rows: 91% of rows their own
        accumulator.add(manifest_row(f"id{min(index, 1_000)}/{index}"))
    stats = accumulator.stats()
    with pytest.raises(UserError, match="has 1,001 distinct labels in 1,100 given, nearly one"):
        make_plan(stats, _config(ShardCounts(1), 1.0), lambda uri: 0)
    allowed = make_plan(stats, _config(ShardCounts(1), 1.0)._replace(max_labels=2_000), len)
    assert len(allowed.labels.names) == 1_001
