"""Error rows as sharded files: which file a row goes to and the file's bytes (pure), the Beam
step that writes them, the commit step's inputs, and conversions read back through the CLI."""

import json
import random
from collections import Counter
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.pvalue import AsList, AsSingleton
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from conftest import (
    RUNNERS,
    arguments,
    count_errors,
    error_rows,
    make_images,
    published,
    write_manifest,
)

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.config.arguments import parse_args
from tfrecord_pipeline.config.conversion import prepare
from tfrecord_pipeline.dataset import publish
from tfrecord_pipeline.dataset.commit import read_info, staged_files
from tfrecord_pipeline.dataset.metadata import INFO_FILE, build_info
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.runners.beam_pipeline import build_pipeline
from tfrecord_pipeline.transforms.beam.error_files import WriteErrors, _CountErrorsFn
from tfrecord_pipeline.transforms.errors import ErrorRow, Reason
from tfrecord_pipeline.transforms.local.error_sink import ErrorSink
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.refresh import RefreshLayout
from tfrecord_pipeline.transforms.write import error_files
from tfrecord_pipeline.transforms.write.error_files import (
    ErrorCounts,
    ErrorFileResult,
    error_file_bytes,
    error_file_count,
    error_file_name,
    file_of,
    write_error_file,
)
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult


def _errors(count: int, key=lambda i: f"img/{i}.jpg") -> list[ErrorRow]:
    """Rows of three kinds in turn: missing file (train), bad label (validation), and corrupt
    image (no split)."""
    kinds = (
        (Reason.MISSING_FILE, "train"),
        (Reason.BAD_LABEL, "validation"),
        (Reason.CORRUPT_IMAGE, ""),
    )
    return [
        ErrorRow(key(i), f"m.csv:{i + 2}", reason, f"row {i}", (("label", "x"),), split)
        for i in range(count)
        for reason, split in [kinds[i % 3]]
    ]


def write_error_files(staging: str, rows: list[ErrorRow], rows_per_file: int) -> list:
    """The local runner's errors files of `rows`: each taken by its sink as it arises."""
    sink = ErrorSink(staging)
    for row in rows:
        sink.add(row)
    files, counts = sink.finish(rows_per_file)
    assert counts == count_errors(rows)
    return files


def test_the_file_count_follows_the_rows_with_always_one_file():
    assert [error_file_count(n, 100) for n in (0, 1, 100, 101, 1000, 1001)] == [1, 1, 1, 2, 10, 11]
    assert error_file_count(10**12, 1) == error_files.MAX_ERROR_FILES
    assert error_file_name(3, 12) == "errors/errors-00003-of-00012.jsonl"


def test_rows_spread_over_the_files_by_source_even_when_they_share_a_key():
    rows = _errors(4000, key=lambda i: "the same key")
    by_file = Counter(file_of(row, 4) for row in rows)
    assert sorted(by_file) == [0, 1, 2, 3] and min(by_file.values()) > 800
    assert {file_of(row, 1) for row in rows} == {0}


def test_a_file_is_the_same_bytes_whatever_order_its_rows_came_in():
    rows = _errors(50) + _errors(3)  # repeated rows too: the whole line breaks the tie
    shuffled = random.Random(5).sample(rows, len(rows))
    data = error_file_bytes(rows)
    assert error_file_bytes(shuffled) == data and error_file_bytes([]) == b""
    lines = data.decode().splitlines()
    assert [json.loads(line)["source"] for line in lines] == sorted(r.source for r in rows)
    assert sorted(lines) == sorted(row.to_json() for row in rows)  # each row, repeats kept


def test_written_files_hold_every_row_once_each_in_its_own_file(tmp_path):
    rows = _errors(25)
    results = write_error_files(str(tmp_path), rows, rows_per_file=10)
    assert [r.file for r in results] == [error_file_name(i, 3) for i in range(3)]
    assert sum(r.rows for r in results) == 25
    for index, result in enumerate(results):
        assert result.staged.startswith("errors-0000") and result.staged != result.file
        mine = [row for row in rows if file_of(row, 3) == index]
        assert (tmp_path / result.staged).read_bytes() == error_file_bytes(mine)
        assert result.rows == len(mine)
    (empty,) = write_error_files(str(tmp_path / "none"), [], rows_per_file=10)
    assert (empty.file, empty.rows) == (error_file_name(0, 1), 0)
    assert (tmp_path / "none" / empty.staged).read_bytes() == b""


def test_counts_per_split_and_reason_merge_as_the_rows_they_count():
    rows = _errors(30)
    counts = count_errors(rows)
    assert counts.total == 30
    assert counts.by_reason() == {"bad_label": 10, "corrupt_image": 10, "missing_file": 10}
    assert counts.by_split() == {"": 10, "train": 10, "validation": 10}
    combine = _CountErrorsFn()  # the Beam combiner, its parts merged as workers would
    parts = [combine.create_accumulator() for _ in range(3)]
    for i, row in enumerate(rows):
        combine.add_input(parts[i % 3], row)
    assert combine.extract_output(combine.merge_accumulators(parts)) == counts
    assert count_errors([]) == ErrorCounts() and ErrorCounts().total == 0


def _plan_and_result(records: int):
    plan = DatasetPlan(LabelMap(("cat",)), (("train", records + 2),), (("train", 1),))
    result = ShardResult(
        "train",
        0,
        1,
        "train-00000-of-00001.tfrecord",
        records,
        10,
        "crc",
        ((0, records),),
        staged="s",
    )
    return plan, result


def test_the_count_law_and_the_gate_come_from_the_counts_and_the_files():
    plan, result = _plan_and_result(records=3)
    errors = [row._replace(split="train") for row in _errors(2)]
    files = [ErrorFileResult(error_file_name(0, 1), "staged", 2, 0, "")]
    info = build_info(plan, [result], count_errors(errors), files, 0, {}, "t", 0.1)
    assert (info.rows_in, info.records, info.errors) == (5, 3, 2)
    assert info.errors_by_reason == {"bad_label": 1, "missing_file": 1}
    assert info.splits["train"].errors == 2 and [f.rows for f in info.error_files] == [2]
    assert "top reasons: bad_label 1, missing_file 1; see errors/" in info.failures[0]
    with pytest.raises(AssertionError, match="2 error rows counted, 1 in errors files"):
        build_info(plan, [result], count_errors(errors), [files[0]._replace(rows=1)], 0, {}, "t", 1)
    with pytest.raises(AssertionError, match="count law broken"):
        build_info(plan, [result], count_errors(errors[:1]), files, 0, {}, "t", 1)


def test_only_the_received_attempt_at_an_errors_file_is_moved_into_the_version(tmp_path):
    target = publish.start(str(tmp_path / "root"))
    rows = _errors(4)
    received = write_error_file(target.staging, 0, 1, rows)
    other = write_error_file(target.staging, 0, 1, rows[:1])  # a duplicate attempt's file
    assert other.staged != received.staged
    publish.finalise(target, staged_files([], [received]))
    version = Path(target.folder)
    assert (version / received.file).read_bytes() == error_file_bytes(rows)
    assert (Path(target.staging) / other.staged).exists()
    assert sorted(p.name for p in (version / "errors").iterdir()) == ["errors-00000-of-00001.jsonl"]


@pytest.mark.slow
def test_write_errors_step_writes_the_files_the_local_runner_writes(tmp_path):
    rows = _errors(9)
    local = write_error_files(str(tmp_path / "local"), rows, rows_per_file=4)
    staging = tmp_path / "beam"
    with BeamTestPipeline() as p:
        written = p | "Errors" >> beam.Create(rows) | WriteErrors(str(staging), 4)
        none = p | "NoErrors" >> beam.Create([]).with_output_types(ErrorRow)
        nothing = none | "WriteNone" >> WriteErrors(str(tmp_path / "none"), 4)
        listed = written["files"] | beam.Map(lambda f: (f.file, f.rows))
        assert_that(listed, equal_to([(f.file, f.rows) for f in local]))
        assert_that(written["counts"], equal_to([count_errors(rows)]), label="Counts")
        empty = nothing["files"] | "Listed" >> beam.Map(lambda f: (f.file, f.rows))
        assert_that(empty, equal_to([(error_file_name(0, 1), 0)]), label="Empty")
        assert_that(nothing["counts"], equal_to([ErrorCounts()]), label="NoCounts")
    beam_bytes = sorted(path.read_bytes() for path in staging.iterdir())
    local_bytes = sorted((tmp_path / "local" / f.staged).read_bytes() for f in local)
    assert beam_bytes == local_bytes and len(beam_bytes) == 3


def _commit_side_inputs(tmp_path: Path, *flags: str) -> set[tuple[str, type]]:
    """(kind, element type) of each side input of the Beam pipeline's commit step."""
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    argv = ["--manifest", str(manifest), "--output", str(tmp_path / "out"), *flags]
    conversion = prepare(*parse_args([*argv, "--no_progress"]))
    p = beam.Pipeline(options=PipelineOptions(list(conversion.beam_args)))
    build_pipeline(p, conversion, publish.start(conversion.options.output))
    found = []

    class Commits(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node):
            if node.full_label == "CommitDataset":
                found.append({(type(s).__name__, s.pvalue.element_type) for s in node.side_inputs})

    p.visit(Commits())
    (side_inputs,) = found
    return side_inputs


@pytest.mark.slow
def test_the_commit_step_is_given_per_shard_and_per_file_results_and_counts_never_rows(
    tmp_path,
):
    """Fails if a side input of the commit carries rows (error rows as a list, as it once did)
    or anything whose type Beam cannot name: only summaries that grow with shards and files."""
    allowed = {
        (AsList.__name__, ShardResult),  # one per shard
        (AsList.__name__, ErrorFileResult),  # one per errors file
        (AsSingleton.__name__, ErrorCounts),  # splits x reasons
        (AsSingleton.__name__, int),  # skipped files
    }
    assert _commit_side_inputs(tmp_path / "plain") == allowed
    assert _commit_side_inputs(tmp_path / "dedup", "--dedup") == allowed
    first = tmp_path / "refresh"
    manifest = write_manifest(first / "m.csv", make_images(first, 1))
    argv = arguments("convert --manifest {m} --output {out}", m=manifest, out=first / "out")
    main([*argv, "--no_progress"])
    # The refresh's counts; its shards come assembled (CarryPublished), one result a shard.
    refreshed = {(AsSingleton.__name__, RefreshLayout)}
    assert _commit_side_inputs(first, "--incremental") == allowed | refreshed


def _manifest_with_bad_rows(root: Path) -> tuple[Path, list[str]]:
    """8 good rows and 11 bad ones of 5 reasons; returns the manifest and the missing files."""
    rows = make_images(root, per_class=2)
    missing = [f"images/gone-{i}.jpg" for i in range(7)]
    rows += [{"image_uri": uri, "label": "coffee"} for uri in missing]
    rows += [
        {"image_uri": "images/coffee/0.jpg", "label": ""},
        {"image_uri": "", "label": "x"},
        {"image_uri": "images/rocket/0.jpg", "label": "rocket", "split": "bad split"},
        {"image_uri": "images/coffee/1.jpg", "label": "coffee"},  # its key a second time
    ]
    return write_manifest(root / "m.csv", rows), missing


@pytest.mark.slow
@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_a_conversion_writes_its_error_rows_as_files_the_metadata_lists(
    tmp_path, monkeypatch, capsys, runner
):
    monkeypatch.setattr(error_files, "ROWS_PER_ERRORS_FILE", 3)
    manifest, missing = _manifest_with_bad_rows(tmp_path)
    argv = [
        "convert",
        "--manifest",
        str(manifest),
        "--output",
        str(tmp_path / "out"),
        "--split",
        "train=0.5,validation=0.5",
        "--max_error_rate",
        "1",
        "--no_progress",
    ]
    assert main([*argv, *RUNNERS[runner]]) == 0
    assert "(errors/*.jsonl)" in capsys.readouterr().out
    version = published(tmp_path / "out")
    info = read_info(str(version))
    files = sorted(p.relative_to(version).as_posix() for p in (version / "errors").iterdir())
    assert [f.file for f in info.error_files] == files == [error_file_name(i, 4) for i in range(4)]
    rows = error_rows(version)
    assert [f.rows for f in info.error_files] == [
        len((version / f).read_text().splitlines()) for f in files
    ]
    assert len(rows) == info.errors == 11 and info.rows_in == info.records + info.errors == 19
    assert (
        Counter(row["reason"] for row in rows)
        == info.errors_by_reason
        == {
            "bad_label": 1,
            "bad_row": 1,
            "bad_split": 1,
            "duplicate_key": 1,
            "missing_file": 7,
        }
    )
    assert sorted(r["key"] for r in rows if r["reason"] == "missing_file") == sorted(missing)
    assert verify(str(tmp_path / "out")) == (info.records, [])
    # Rows go to files by a hash of their source, which holds this test's folder: damage a
    # file that has rows, whichever it is this time.
    fullest = max(info.error_files, key=lambda listed: listed.rows).file
    damaged = version / fullest
    damaged.write_text(damaged.read_text().split("\n", 1)[1])  # one row lost
    (problem,) = verify(str(tmp_path / "out"))[1]
    assert problem == f"{fullest}: size or CRC-32C differs from {INFO_FILE}"
