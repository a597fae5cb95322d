"""pipeline/cli/summary.py: the table a run prints when it ends, and a remote job's counters."""

from conftest import dataset_info
from tfrecord_pipeline.cli.summary import format_counters, format_summary
from tfrecord_pipeline.dataset.metadata import DatasetInfo, ShardInfo, SplitInfo


def _split(examples: int, shards: int, errors: int = 0, boxes_dropped: int = 0) -> SplitInfo:
    files = [ShardInfo(f"s{n}", examples // shards, 1, "") for n in range(shards)]
    return SplitInfo(examples, 1_500_000 * shards, errors, {}, files, boxes_dropped)


def _info(splits: dict, errors: int = 0, failures=(), **more) -> DatasetInfo:
    by_reason = {"missing_file": errors} if errors else {}
    records = sum(split.examples for split in splits.values())
    return dataset_info(
        rows_in=records + errors,
        records=records,
        errors=errors,
        errors_by_reason=by_reason,
        splits=splits,
        failures=list(failures),
        **more,
    )


def test_the_table_lists_splits_by_name_then_their_total_between_rules():
    info = _info({"train": _split(12_000, 4, errors=2), "test": _split(300, 1)}, errors=3)
    lines = format_summary(info, "out/versions/v1").splitlines()
    assert lines[0].split() == ["split", "examples", "shards", "size", "errors"]
    assert set(lines[1]) == {"-"} and lines[4] == lines[1] and len(lines[1]) == len(lines[0])
    assert lines[2].split() == ["test", "300", "1", "1.5", "MB", "0"]
    assert lines[3].split() == ["train", "12,000", "4", "6.0", "MB", "2"]
    assert lines[5].split() == ["total", "12,300", "5", "7.5", "MB", "3"]
    assert len({len(line) for line in lines[:6]}) == 1  # columns aligned
    assert lines[2].startswith("test  ") and lines[2].endswith(" 0")  # names left, counts right
    assert lines[6] == "rows with no split (unparsed lines, unlisted folders): 1"
    assert lines[7] == "rejected rows by reason: missing_file: 3  (errors/*.jsonl)"
    assert lines[-1] == "version: out/versions/v1  (published)"


def test_a_clean_run_prints_only_the_table_and_a_failed_one_says_not_published():
    clean = _info({"train": _split(10, 1)})
    assert len(format_summary(clean, "v").splitlines()) == 6
    failed = _info({"train": _split(10, 1)}, failures=["error rate 50%"])
    assert format_summary(failed, "v").splitlines()[-1] == "version: v  (NOT published)"


def test_detection_and_tree_counts_are_told_only_when_there_are_some():
    splits = {"train": _split(10, 1, boxes_dropped=2), "val": _split(5, 1), "x": _split(1, 1, 0, 1)}
    info = _info(splits, skipped_files=7, boxes_dropped=3, negatives_dropped=4)
    lines = format_summary(info, "v").splitlines()
    assert "7 non-image files or deeper folders skipped in trees" in lines
    assert "boxes dropped, no area inside their image: train 2, x 1" in lines
    assert "4 images without objects left out (--drop_negatives)" in lines


def test_counters_sum_the_errors_and_name_each_reason_in_order():
    counters = {"rows": 1234, "records": 1200, "bytes": 5_000_000}
    line = "rows read: 1,234  images ok: 1,200  bytes written: 5,000,000  errors: 0"
    assert format_counters(counters) == line
    counters |= {"error_missing_file": 30, "error_corrupt_image": 4}
    assert format_counters(counters) == line[:-1] + "34 (corrupt_image 4, missing_file 30)"
    assert format_counters({}).endswith("errors: 0")
