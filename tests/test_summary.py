"""pipeline/cli/summary.py: the table a run prints when it ends, a refresh's counts, and a
remote job's counters; end to end, what an --incremental run says and the bar's rate, of the
rows converted only."""

import json
import re
from pathlib import Path

import pytest
from conftest import RUNNERS, command, dataset_info, make_images, published, write_manifest

from tfrecord_pipeline.cli.summary import format_counters, format_summary, refresh_lines
from tfrecord_pipeline.dataset.metadata import DatasetInfo, SplitInfo
from tfrecord_pipeline.transforms.plan.rows_files import parse_rows
from tfrecord_pipeline.transforms.write.published import ShardInfo


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


def test_a_refresh_says_rows_kept_converted_dropped_and_shards_carried_rewritten_new():
    counts = {"carried": 90, "rewritten": 8, "converted": 5, "damaged": [], "reconverted": 0}
    counts |= {"dropped": 3, "shards_carried": 9, "shards_rewritten": 1, "shards_new": 2}
    assert refresh_lines(counts) == [
        "refresh: rows 98 kept, 5 converted (new or changed), 3 dropped (gone or changed); "
        "shards 9 carried, 1 rewritten, 2 new"
    ]


END = re.compile(
    r"\[#+\] ([\d,]+)/\1 images  done in \d+:\d\d(?:  \(([\d,]+) converted at [\d.,]+ img/s\))?"
)


def _convert(manifest: Path, out: Path, runner: str, *flags: str):
    """The command with its bar (stderr is no terminal: plain lines); its status, summary and
    the bar's last line."""
    argv = ["--manifest", manifest, "--output", out, "--num_shards", "3", *flags]
    done = command("convert", *argv, *RUNNERS[runner])
    assert done.returncode == 0, done.stderr
    (end,) = [line for line in done.stderr.splitlines() if "done in" in line]
    return done.stdout, END.fullmatch(end)


def _shards(out: Path) -> dict[str, tuple[bytes, set[str]]]:
    """The published version's shards: each file's bytes and its records (key, fingerprint)."""
    version = published(out)
    info = json.loads((version / "tfrecord_pipeline.json").read_text())
    return {
        shard["file"]: (
            (version / shard["file"]).read_bytes(),
            {r[:2] for r in parse_rows((version / shard["rows"]).read_text())},
        )
        for split in info["splits"].values()
        for shard in split["shards"]
    }


def _kinds(before: dict, after: dict) -> tuple[int, int, int]:
    """Shards of `after` carried (a published file's bytes), new (no published record), and
    rewritten (the others), found from the files themselves."""
    files = {data for data, _ in before.values()}
    keys = set().union(*(keys for _, keys in before.values()))
    carried = sum(1 for data, _ in after.values() if data in files)
    new = sum(1 for data, k in after.values() if data not in files and not k & keys)
    return carried, len(after) - carried - new, new


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_a_refresh_says_what_it_kept_converted_and_dropped_and_rates_only_the_converted(
    tmp_path, runner
):
    rows = make_images(tmp_path, per_class=6)  # 24 rows
    out = tmp_path / "out"
    stdout, end = _convert(write_manifest(tmp_path / "a.csv", rows), out, runner)
    assert "refresh:" not in stdout and end[2] == "24"  # a full run converts every row
    before = _shards(out)

    more = make_images(tmp_path / "more", per_class=1, seed=3)  # 4 new rows
    changed = {**rows[5], "label": rows[-1]["label"]}  # relabelled: converted again
    rows = (
        rows[2:5]
        + [changed]
        + rows[6:]
        + [{**r, "image_uri": f"more/{r['image_uri']}"} for r in more]
    )
    stdout, end = _convert(write_manifest(tmp_path / "b.csv", rows), out, runner, "--incremental")
    carried, rewritten, new = _kinds(before, _shards(out))
    assert carried and new and carried + rewritten + new == len(_shards(out))
    assert (
        f"refresh: rows 21 kept, 5 converted (new or changed), 3 dropped (gone or changed); "
        f"shards {carried} carried, {rewritten} rewritten, {new} new"
    ) in stdout.splitlines()
    assert end[1] == "26" and end[2] == "5"  # the rate is of the 5 rows converted

    stdout, end = _convert(write_manifest(tmp_path / "b.csv", rows), out, runner, "--incremental")
    shards = len(_shards(out))
    assert (
        f"refresh: rows 26 kept, 0 converted (new or changed), 0 dropped (gone or changed); "
        f"shards {shards} carried, 0 rewritten, 0 new"
    ) in stdout.splitlines()
    assert end[1] == "26" and end[2] is None  # nothing converted: no rate


def test_an_archive_that_gave_no_rows_for_being_flat_is_told_in_one_line():
    info = _info({"train": _split(9, 1)}, errors=1, skipped_files=5)
    info.errors_by_reason = {"flat_archive": 1}
    lines = format_summary(info, "v").splitlines()
    told = [line for line in lines if "--ground_truth" in line]
    assert told == [
        "an archive gave no rows: its images lie at its top, in no class folder; label them "
        "with --ground_truth FILE (docs/inputs.md#archives)"
    ]
    assert not any("--ground_truth" in line for line in format_summary(_info({}), "v").split())
