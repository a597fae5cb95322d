"""pipeline/cli/hints.py: how many shards hashed records are unlikely to leave one of empty, and
the missing files looked for in the current folder: a sample, whatever the errors' count."""

import dataclasses
import json
import math

from conftest import dataset_info, make_images, published, write_manifest

from tfrecord_pipeline.cli.hints import (
    SAMPLED_MISSING,
    empty_shard_warnings,
    missing_files_hint,
    unused_shard_counts,
)
from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.metadata import ErrorFileInfo, SplitInfo
from tfrecord_pipeline.transforms.plan.sharding import shards_left_full
from tfrecord_pipeline.transforms.write.published import ShardInfo


def test_shards_left_full_keeps_the_expected_empty_shards_under_a_twentieth():
    for records in (1, 9, 40, 130, 10_000):
        shards = shards_left_full(records)
        assert 1 <= shards <= records
        expected_empty = shards * math.exp(records * math.log1p(-1 / shards)) if shards > 1 else 0
        assert expected_empty < 1 / 20
        more = shards + 1
        assert more * math.exp(records * math.log1p(-1 / more)) >= 1 / 20


def test_shards_left_full_of_two_keeps_the_expected_shards_of_fewer_under_a_twentieth():
    def expected(n: int, records: int) -> float:  # shards of 0 or 1 of `records` records
        return n * ((1 - 1 / n) ** records + records / n * (1 - 1 / n) ** (records - 1))

    for records in (2, 9, 40, 130, 10_000):
        shards = shards_left_full(records, 2)
        assert 1 <= shards <= shards_left_full(records)
        assert shards == 1 or expected(shards, records) < 1 / 20
        assert expected(shards + 1, records) >= 1 / 20


def test_with_write_index_a_shard_of_one_record_is_warned_of_as_the_tfrecord_package_fails():
    """The PyTorch tfrecord package fails (IndexError) on a shard of 0 or 1 records read
    through its index: with --write_index such a shard is said, an empty one still is without."""
    shards = [ShardInfo(f"s{n}", records, 0, "") for n, records in enumerate([1, 9, 30])]
    splits = {"train": SplitInfo(40, 1, 0, {}, shards), "one": SplitInfo(1, 1, 0, {}, shards[:1])}

    def said(**options) -> list[str]:
        return empty_shard_warnings(dataset_info(options=options, splits=splits))

    assert said() == []
    assert said(write_index=True) == [
        "tfrecord-pipeline: warning: split 'train' has 40 records in 3 shards, 1 of them of 0 "
        "or 1 records: the PyTorch tfrecord package fails on such a shard (records go to "
        "shards by key hash: with --num_shards train=6 or fewer, one is unlikely)"
    ]


def _version_with_missing(tmp_path, uris: list[str], rows_in: int):
    """A version folder whose one errors file lists a missing_file row per uri, each read from
    the manifest tmp_path/lists/m.csv; its metadata."""
    version = tmp_path / f"version{len(list(tmp_path.glob('version*')))}"
    (version / "errors").mkdir(parents=True)
    lines = [
        json.dumps(
            {"reason": "missing_file", "source": f"lists/m.csv@{n}", "row": {"image_uri": u}}
        )
        for n, u in enumerate(uris)
    ]
    (version / "errors" / "e.jsonl").write_text("".join(f"{line}\n" for line in lines))
    errors = [ErrorFileInfo("errors/e.jsonl", len(uris))]
    info = dataset_info(
        rows_in=rows_in, errors=len(uris), errors_by_reason={"missing_file": len(uris)}
    )
    return str(version), dataclasses.replace(info, error_files=errors)


def test_only_a_bounded_sample_of_missing_files_is_looked_for_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the manifest's folder resolves against the current one
    (tmp_path / "lists").mkdir()
    (tmp_path / "images").mkdir()
    for n in range(SAMPLED_MISSING):
        (tmp_path / "images" / f"{n}.jpg").touch()
    base = tmp_path / "lists"
    found = [f"{base}/images/{n}.jpg" for n in range(SAMPLED_MISSING)]  # exist under tmp_path
    absent = [f"{base}/images/x{n}.jpg" for n in range(SAMPLED_MISSING * 5)]
    version, info = _version_with_missing(tmp_path, found + absent, rows_in=120)
    hint = missing_files_hint(info, version, None, str(tmp_path))
    assert hint == (
        f"tfrecord-pipeline: hint: most missing files exist relative to the current folder "
        f"({tmp_path}); relative paths are read from the manifest's folder ({base}): use "
        "--image_root ."
    )
    version, info = _version_with_missing(tmp_path, absent + found, rows_in=120)
    assert missing_files_hint(info, version, None, str(tmp_path)) is None  # the rest unread
    version, info = _version_with_missing(tmp_path, found, rows_in=41)  # under half missing
    assert missing_files_hint(info, version, None, str(tmp_path)) is None
    version, info = _version_with_missing(tmp_path, found, rows_in=20)
    assert missing_files_hint(info, version, str(base), str(tmp_path)).endswith(
        f"relative paths are read from --image_root {base}: use --image_root ."
    )


def test_only_shard_counts_given_for_a_split_no_row_has_and_no_other_warning_names_are_said():
    splits = {"train": SplitInfo(4, 1, 0, {}, [])}

    def said(**options) -> list[str]:
        return unused_shard_counts(
            dataset_info(records=4, rows_in=4, options=options, splits=splits)
        )

    assert [line.split(" but ")[0] for line in said(num_shards="train=1,valid=2,test=3")] == [
        "tfrecord-pipeline: warning: --num_shards names 'valid'",
        "tfrecord-pipeline: warning: --num_shards names 'test'",
    ]
    assert said(num_shards="2") == said(num_shards="train=1") == []
    # A preset's own counts; a split --split names (its own warning says it has no row).
    assert said(num_shards="train=1024,validation=128", preset="tpu-imagenet") == []
    assert said(num_shards="train=1,validation=2", split="train=0.9,validation=0.1") == []


def test_labels_differing_only_in_case_or_spaces_are_two_classes_and_said_so(tmp_path, capsys):
    """`cat` and `Cat ` became two classes without a word; the end spaces are dropped (as a
    split name's are), the case is kept (it can mean a class) and warned of, in one line."""
    rows = make_images(tmp_path, per_class=1)
    rows[0]["label"], rows[1]["label"] = "cat", "Cat "
    out = tmp_path / "out"
    argv = ["convert", "--manifest", str(write_manifest(tmp_path / "m.csv", rows))]
    assert main([*argv, "--output", str(out), "--no_progress"]) == 0
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "case" in line]
    assert line.startswith("tfrecord-pipeline: warning: labels 'Cat' and 'cat' differ only in")
    assert published(out).joinpath("labels.txt").read_text().splitlines()[:2] == ["Cat", "cat"]
