"""`tfrecord_pipeline.json` at the unit tier: the description built from shard and errors-file
results, its JSON round trip, and the quality gates whose failures keep a version unpublished
(exit status 1)."""

import hashlib
import json

import pytest

from tfrecord_pipeline.dataset.metadata import (
    DatasetInfo,
    SplitInfo,
    accepting_rate,
    build_info,
    label_count,
    quality_failures,
)
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.write.error_files import (
    ErrorCounts,
    ErrorFileResult,
    error_file_name,
)
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult


def _shard(split: str, index: int, records: int, labels=(), **extra) -> ShardResult:
    name = f"{split}-{index:05d}-of-00002.tfrecord"
    return ShardResult(
        split, index, 2, name, records, 100 * records, f"crc{index}", labels, **extra
    )


CAT_DOG = LabelMap(("cat", "dog"))


def _built(labels: LabelMap = CAT_DOG, options=None, max_error_rate=1.0):
    """Two train shards and one validation shard, delivered out of order; three error rows,
    two of them rejected before a split was assigned (they count as rows in, in no split)."""
    plan = DatasetPlan(labels, (("train", 8), ("validation", 2)), (("train", 2), ("validation", 1)))
    results = [
        _shard("train", 1, 3, ((0, 1), (10, 2)), rows_file="train-1.rows", boxes_dropped=2),
        _shard("validation", 0, 2, ((1, 2),)),
        _shard("train", 0, 4, ((0, 3), (2, 1)), index_file="train-0.idx", boxes_dropped=1),
    ]
    counts = ErrorCounts((("", "bad_row", 2), ("train", "missing_file", 1)))
    files = [
        ErrorFileResult(error_file_name(i, 2), f"s{i}", rows, 3 * rows, "")
        for i, rows in ((1, 2), (0, 1))
    ]
    return build_info(plan, results, counts, files, 5, options or {}, "9.9", max_error_rate, 4)


def _info(**fields) -> DatasetInfo:
    """A description of 10 rows, all converted into one split; `fields` override."""
    split = SplitInfo(examples=10, bytes=0, errors=0, label_counts={}, shards=[])
    base = dict(
        tool_version="t",
        options={},
        features={},
        compression="none",
        labels={},
        rows_in=10,
        records=10,
        errors=0,
        errors_by_reason={},
        skipped_files=0,
        splits={"train": split},
        failures=[],
    )
    return DatasetInfo(**{**base, **fields})


def test_each_split_is_summed_from_its_own_shards_in_index_order():
    info = _built()
    train, validation = info.splits["train"], info.splits["validation"]
    assert [s.file for s in train.shards] == [
        "train-00000-of-00002.tfrecord",
        "train-00001-of-00002.tfrecord",
    ]
    assert (train.examples, train.bytes, train.errors, train.boxes_dropped) == (7, 700, 1, 3)
    assert (validation.examples, validation.errors, validation.label_counts) == (2, 0, {"1": 2})
    assert train.label_counts == {"0": 4, "2": 1, "10": 2}  # ids as JSON keys, summed
    assert [(s.index, s.rows) for s in train.shards] == [("train-0.idx", ""), ("", "train-1.rows")]
    assert (info.rows_in, info.records, info.errors) == (12, 9, 3)
    assert info.errors_by_reason == {"bad_row": 2, "missing_file": 1}
    assert [(f.file, f.rows) for f in info.error_files] == [
        (error_file_name(0, 2), 1),
        (error_file_name(1, 2), 2),
    ]
    assert (info.skipped_files, info.negatives_dropped, info.boxes_dropped) == (5, 4, 3)
    assert (info.tool_version, info.failures) == ("9.9", [])


CAT = hashlib.sha256(b"cat\n").hexdigest()


@pytest.mark.parametrize(
    ("labels", "options", "expected"),
    [
        (LabelMap(("cat",), offset=1), {}, ("none", "names", 1, 1, CAT)),
        (LabelMap((), integers=True), {"compression": "gzip"}, ("gzip", "integers", 0, [])),
        (LabelMap(("cat",)), {"compression": "zlib?"}, ("none", "names", 0, 1, CAT)),
        (LabelMap(("7", "9"), integers=True), {}, ("none", "integers", 0, ["7", "9"])),
    ],
)
def test_compression_and_labels_are_described_from_the_options_and_the_label_map(
    labels, options, expected
):
    info = _built(labels, options)
    assert (info.compression, *info.labels.values()) == expected


def test_the_metadata_holds_no_label_name_so_long_names_do_not_grow_it():
    """A vocabulary of --max_labels names is in labels.txt only: the metadata, read by every
    reader, refresh and rollback, holds their count and the file's sha256."""
    short, long = ([f"{number:0{length}d}" for number in range(2000)] for length in (4, 256))
    texts = [_built(LabelMap(tuple(names)), {}).to_json() for names in (short, long)]
    assert short[7] not in texts[0] and long[7] not in texts[1]
    assert len(texts[0]) == len(texts[1])
    assert label_count(json.loads(texts[1])["labels"]) == 2000


def test_a_format_1_metadata_counts_the_names_it_lists():
    assert label_count({"kind": "names", "offset": 1, "names": ["cat", "dog"]}) == 2


@pytest.mark.parametrize(
    ("options", "lists"),
    [
        ({}, []),
        ({"multi_label": True}, ["image/class/label", "image/class/text"]),
        ({"features": [["weight", "float"]]}, []),
    ],
)
def test_list_features_follow_the_options(options, lists):
    info = _built(options=options)
    assert info.list_features == lists
    assert ("weight" in info.features) == ("features" in options)


def test_the_json_round_trips_and_is_the_same_bytes_every_time():
    info = _built(LabelMap(("cat",)), {"seed": 3, "manifest": "café/狗.csv"})
    text = info.to_json()
    assert DatasetInfo.from_json(text) == info
    assert DatasetInfo.from_json(text).to_json() == text
    assert "café" in text and "狗" in text  # written as UTF-8, not \u escapes
    assert list(json.loads(text)) == sorted(json.loads(text))  # sorted keys: no dict order


def test_a_file_without_the_later_fields_reads_with_their_defaults():
    """Fields added after format version 1 shipped have defaults, so older files still read."""
    fields = json.loads(_built().to_json())
    for later in ("error_files", "list_features", "negatives_dropped", "boxes_dropped"):
        del fields[later]
    for split in fields["splits"].values():
        del split["boxes_dropped"]
        for shard in split["shards"]:
            del shard["index"], shard["rows"]
    info = DatasetInfo.from_json(json.dumps(fields))
    assert (info.error_files, info.list_features, info.boxes_dropped) == ([], [], 0)
    assert info.splits["train"].shards[0].index == "" and info.splits["train"].boxes_dropped == 0


SPLITS = {
    "train": SplitInfo(6, 0, 0, {}, []),
    "validation": SplitInfo(0, 0, 0, {}, []),
}


@pytest.mark.parametrize(
    ("fields", "max_error_rate", "failures"),
    [
        ({"errors": 1, "records": 9}, 0.1, []),  # at the limit is not over it
        (
            {"errors": 2, "records": 8, "errors_by_reason": {"missing_file": 2}},
            0.1,
            [
                "2 of 10 rows rejected (20.0% > --max_error_rate 10.0%); top reasons: "
                "missing_file 2; see errors/; to publish without them, rerun with "
                "--max_error_rate 0.2"
            ],
        ),
        (
            {"errors": 9, "records": 1, "errors_by_reason": {"a": 1, "b": 3, "c": 2, "d": 3}},
            0.5,
            [
                "9 of 10 rows rejected (90.0% > --max_error_rate 50.0%); top reasons: "
                "b 3, d 3, c 2; see errors/; to publish without them, rerun with "
                "--max_error_rate 0.9"
            ],
        ),
        (
            {"rows_in": 0, "records": 0, "splits": {"train": SplitInfo(0, 0, 0, {}, [])}},
            0.0,
            ["no records were written", "split 'train' has no examples"],
        ),
        (
            {"rows_in": 4, "errors": 4, "records": 0, "errors_by_reason": {"bad_label": 4}},
            1.0,
            ["no records were written"],
        ),
        ({"splits": SPLITS}, 0.0, ["split 'validation' has no examples"]),
    ],
    ids=["at-limit", "over", "top-three", "empty", "all-rejected", "empty-split"],
)
def test_quality_gates(fields, max_error_rate, failures):
    """Each failure is one line the CLI prints before exiting 1; none means published."""
    assert quality_failures(_info(**fields), max_error_rate) == failures


@pytest.mark.parametrize(
    ("errors", "rows", "written"),
    [(2, 63, "0.032"), (1, 100, "0.01"), (63, 63, "1"), (1, 3, "0.34"), (1, 10**7, "0.0000001")],
)
def test_the_rate_that_accepts_is_rounded_up_to_two_digits_and_passes_the_gate(
    errors, rows, written
):
    """The gate compares floats; the value printed, parsed as the flag parses it, is never
    under the rate, and never more than two significant digits above it."""
    assert accepting_rate(errors, rows) == written
    info = _info(rows_in=rows, errors=errors, records=rows - errors)
    assert not any("rejected" in failure for failure in quality_failures(info, float(written)))


def test_build_info_applies_the_gates_with_its_max_error_rate():
    assert _built(max_error_rate=0.25).failures == []  # 3 of 12 rows rejected
    (failure,) = _built(max_error_rate=0.2).failures
    assert failure.startswith("3 of 12 rows rejected (25.0% > --max_error_rate 20.0%)")
