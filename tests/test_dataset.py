"""Pure functions, no Beam: splits, shards, labels, plan, framing."""

import gzip
import io
from collections import Counter

import pytest

from transforms.errors import Reason, RowError, UserError
from transforms.image.images import ImageConfig
from transforms.manifest.labels import LabelMap, label_map_from_labels, parse_label_map
from transforms.manifest.rows import ManifestRow, row_position
from transforms.manifest.splits import assign_split, parse_split_spec
from transforms.plan.dataset import (
    DatasetPlan,
    LabelSource,
    PlanAccumulator,
    ShardCounts,
    all_shards,
    group_by_shard,
    make_plan,
    parse_shard_counts,
)
from transforms.plan.dedup import keep_first
from transforms.plan.sharding import (
    MAX_PIECES,
    ShardId,
    is_shard_file_name,
    piece_of,
    record_order,
    shard_for,
)
from transforms.tfrecord.records import ShardFileWriter, frame, masked_crc32c
from transforms.write.shard_writer import (
    REMOTE_THREADS_PER_CORE,
    WriteConfig,
    process_cores,
    writer_threads,
)


def test_split_assignment_is_stable_and_follows_fractions():
    spec = parse_split_spec("train=0.8,validation=0.1,test=0.1")
    splits = [assign_split(f"img/{i}.jpg", "", spec) for i in range(20000)]
    assert splits == [assign_split(f"img/{i}.jpg", "", spec) for i in range(20000)]
    counts = Counter(splits)
    assert abs(counts["train"] / 20000 - 0.8) < 0.02
    assert abs(counts["test"] / 20000 - 0.1) < 0.02


def test_own_split_wins_and_default_is_train():
    spec = parse_split_spec("train=0.5,validation=0.5")
    assert assign_split("k", "Validation ", spec) == "validation"
    assert assign_split("k", "", None) == "train"
    with pytest.raises(RowError) as error:
        assign_split("k", "my split", None)
    assert error.value.reason is Reason.BAD_SPLIT


@pytest.mark.parametrize("text", ["train=0.9", "train=0.5,train=0.5", "a=x", "train", "a=0,b=1"])
def test_bad_split_specs_are_user_errors(text):
    with pytest.raises(UserError):
        parse_split_spec(text)


def test_shards_mix_labels_and_order_is_deterministic():
    keys = [f"{label}/{i}.jpg" for label in "abcd" for i in range(400)]
    shards = Counter(shard_for(key, "train", 8).index for key in keys)
    assert sorted(shards) == list(range(8))
    assert max(shards.values()) < 1.25 * len(keys) / 8
    in_shard = sorted((k for k in keys if shard_for(k, "train", 8).index == 0), key=record_order)
    assert len({k[0] for k in in_shard[:20]}) == 4  # the first records already mix all labels


def test_shard_file_names():
    assert ShardId("train", 3, 8).file_name(False) == "train-00003-of-00008.tfrecord"
    assert ShardId("val", 0, 1).file_name(True) == "val-00000-of-00001.tfrecord.gz"
    assert is_shard_file_name("train-00003-of-00008.tfrecord")
    assert not is_shard_file_name("train-3-of-8.tfrecord")


def test_labels_sorted_by_name_with_offset_and_pinned_map():
    labels = label_map_from_labels(["tulip", "daisy", "rose", "daisy"], offset=1)
    assert [labels.id_of(n) for n in ("daisy", "rose", "tulip")] == [1, 2, 3]
    pinned = parse_label_map(labels.to_text(), offset=1)
    assert pinned == labels
    with pytest.raises(RowError) as error:
        pinned.id_of("sunflower")
    assert error.value.reason is Reason.UNKNOWN_LABEL


def test_integer_labels_pass_through():
    labels = label_map_from_labels(["10", "2", "7"], offset=1)
    assert labels.integers and labels.id_of("10") == 10 and labels.id_of("2") == 2


def test_label_map_file_errors():
    with pytest.raises(UserError):
        parse_label_map("\n\n")
    with pytest.raises(UserError):
        parse_label_map("a\nb\na\n")


def _row(key, split="train", uri="x.jpg"):
    return ManifestRow(key, uri, key.split("/")[0], split, (), "m.csv", row_position(0, 2))


def test_plan_counts_shards_from_sampled_sizes():
    accumulators = [PlanAccumulator(), PlanAccumulator()]
    for i in range(300):
        accumulators[i % 2].add(_row(f"a/{i}", "train" if i % 3 else "test", f"f{i}"))
    stats = accumulators[0].merge(accumulators[1]).stats()
    plan = make_plan(stats, LabelSource(), ShardCounts(), 1.0, lambda uri: 100 * 1024)
    assert dict(plan.rows) == {"test": 100, "train": 200}
    # 200 rows × 100 KiB ≈ 19.5 MiB at 1 MiB per shard → 20 shards.
    assert dict(plan.shards) == {"test": 10, "train": 20}
    fixed = make_plan(stats, LabelSource(), parse_shard_counts("train=3"), 1.0, lambda uri: 0)
    assert dict(fixed.shards) == {"test": 1, "train": 3}


def test_plan_samples_only_the_splits_sized_by_bytes():
    counts = parse_shard_counts("train=3")
    accumulator = PlanAccumulator(counts)
    for i in range(300):
        accumulator.add(_row(f"a/{i}", "train" if i % 3 else "test", f"f{i}"))
    stats = accumulator.stats()
    assert dict(stats.samples).keys() == {"test"}
    plan = make_plan(stats, LabelSource(), counts, 1.0, lambda uri: 100 * 1024)
    assert dict(plan.shards) == {"test": 10, "train": 3}


def test_shards_that_num_shards_makes_large_are_planned_in_pieces():
    counts = parse_shard_counts("train=2")
    accumulator = PlanAccumulator(counts, sample_every_split=True)
    for i in range(300):
        accumulator.add(_row(f"a/{i}", "train" if i % 3 else "test", f"f{i}"))
    plan = make_plan(accumulator.stats(), LabelSource(), counts, 1.0, lambda uri: 100 * 1024)
    # train: 200 rows × 100 KiB in 2 shards ≈ 9.8 MiB a shard → 10 pieces of ≤ 1 MiB; test
    # is sized by bytes, so its shards are already about 1 MiB: whole.
    assert dict(plan.shards) == {"test": 10, "train": 2}
    assert plan.pieces == (("train", 10),)
    assert (plan.pieces_of("train"), plan.pieces_of("test")) == (10, 1)
    huge = make_plan(accumulator.stats(), LabelSource(), counts, 0.001, lambda uri: 100 * 1024)
    assert huge.pieces_of("train") == MAX_PIECES  # one compose request joins them


def test_pieces_are_ranges_of_the_record_order():
    """Each piece in record order, the pieces in piece order: the whole shard's order."""
    keys = [f"key-{n}" for n in range(2000)]
    in_order = sorted(keys, key=record_order)
    pieces = [piece_of(key, 7) for key in in_order]
    assert pieces == sorted(pieces) and set(pieces) == set(range(7))
    assert all(piece_of(key, 1) == 0 for key in keys)


def test_plan_does_not_depend_on_bundle_boundaries():
    rows = [_row(f"a/{i}", uri=f"f{i}") for i in range(500)]
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


@pytest.mark.parametrize("text", ["0", "x", "train=0", "Train=2", "100000"])
def test_bad_shard_counts(text):
    with pytest.raises(UserError):
        parse_shard_counts(text)


def test_masked_crc_and_framing_match_the_tfrecord_format():
    # Known answer: TensorFlow's masked CRC of the 8-byte length 0 (an empty record).
    assert masked_crc32c(b"\x00" * 8) == 0x07980329
    record = frame(b"hello")
    assert record[:8] == (5).to_bytes(8, "little") and record[12:17] == b"hello"
    assert len(record) == 8 + 4 + 5 + 4


class _Keep(io.BytesIO):
    def close(self):
        self.closed_value = self.getvalue()


def test_gzip_shards_are_deterministic_and_fingerprinted():
    outputs = []
    for _ in range(2):
        sink = _Keep()
        writer = ShardFileWriter(sink, compress=True)
        writer.write(b"a" * 1000)
        writer.close()
        outputs.append((sink.closed_value, writer.crc32c, writer.bytes))
    assert outputs[0] == outputs[1]
    data = outputs[0][0]
    assert gzip.decompress(data) == frame(b"a" * 1000) and outputs[0][2] == len(data)


def test_label_map_text_round_trip():
    labels = LabelMap(("b", "a"), 0)
    assert labels.to_text() == "b\na\n" and labels.id_of("a") == 1


def test_writer_threads_follow_where_the_time_goes():
    local = WriteConfig("out")
    assert writer_threads(local, remote=False, cores=4) == 1  # pass-through: GIL-bound glue
    for image in (
        ImageConfig(validate="full"),
        ImageConfig(resize_short_side=256),
        ImageConfig(max_side=512),
        ImageConfig(encoding="raw"),
    ):
        assert writer_threads(local._replace(image=image), remote=False, cores=4) == 4
    assert writer_threads(local, remote=True, cores=4) == 4 * REMOTE_THREADS_PER_CORE
    assert writer_threads(local._replace(threads=3), remote=True, cores=4) == 3


def test_worker_processes_size_their_threads_from_their_share_of_the_machine():
    """On a 4-core Dataflow worker, one SDK process per core: 8 threads each, 32 in all, not
    the 4 x 32 that sizing each process from the machine's cores gave."""
    remote = WriteConfig("out")
    per_process = {n: writer_threads(remote, True, process_cores(n, 4)) for n in (0, 1, 2, 8)}
    assert per_process == {0: 8, 1: 32, 2: 16, 8: 8}  # 0: one process per core


def test_rows_group_by_their_shard_and_unknown_labels_are_errors():
    plan = DatasetPlan(LabelMap(("cat",)), (("train", 3), ("test", 1)), (("train", 4), ("test", 1)))
    rows = [_row(f"cat/{i}") for i in range(40)] + [_row("cat/t", "test"), _row("dog/d")]
    by_shard, errors = group_by_shard(rows, plan)
    assert [(e.key, e.reason) for e in errors] == [("dog/d", Reason.UNKNOWN_LABEL)]
    assert sum(map(len, by_shard.values())) == 41
    assert all(
        shard_for(r.key, r.split, 4 if r.split == "train" else 1) == shard
        for shard, shard_rows in by_shard.items()
        for r in shard_rows
    )
    assert list(all_shards(plan)) == [
        *(ShardId("train", i, 4) for i in range(4)),
        ShardId("test", 0, 1),
    ]


def test_keep_first_rejects_later_copies_but_leaves_repeated_keys_to_the_writer():
    first = _row("cat/a")  # at byte 2 of m.csv

    def later(key, offset):
        return _row(key)._replace(position=row_position(0, offset))

    repeat, copy = later("cat/a", 5), later("cat/b", 3)
    kept, errors = keep_first([copy, repeat, first])
    assert kept == [first, repeat]
    assert [(e.key, e.reason, e.message) for e in errors] == [
        ("cat/b", Reason.DUPLICATE_CONTENT, "same bytes as m.csv@2")
    ]
