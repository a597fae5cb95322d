"""transforms/local/error_sink.py: error rows leave memory for the staging folder as they arise
(sorted runs, merged at the end) and make the same errors files as every row at once; through
the CLI the local runner writes the Beam pipeline's errors files, and a killed run publishes
none of its rows."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import BEAM, count_errors, make_images, published, version_files, write_manifest

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.versions import POINTER, STAGING, VERSIONS
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.transforms.errors import ErrorRow, Reason
from tfrecord_pipeline.transforms.local import error_sink
from tfrecord_pipeline.transforms.local.error_sink import RUN_PREFIX, ErrorSink
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write import error_files
from tfrecord_pipeline.transforms.write.error_files import (
    ErrorCounts,
    error_file_bytes,
    error_file_count,
    error_file_name,
    file_of,
)

COMMAND = str(Path(sys.executable).parent / "tfrecord-pipeline")


def _rows(count: int, seed: int = 3) -> list[ErrorRow]:
    """Rows of four reasons with shared keys, long and short messages, and exact repeats, in
    no particular order."""
    reasons = (Reason.DUPLICATE_KEY, Reason.MISSING_FILE, Reason.BAD_LABEL, Reason.BAD_ROW)
    rows = [
        ErrorRow(
            f"img/{i % 37}.jpg",
            f"m.csv@{i * 41}",
            reasons[i % 4],
            "é" * (i % 50),
            (("image_uri", f"img/{i % 37}.jpg"), ("label", "x")),
            ("train", "validation", "")[i % 3],
        )
        for i in range(count)
    ]
    rows += rows[:25]  # the same row twice: its line breaks no tie, both are kept
    return random.Random(seed).sample(rows, len(rows))


@pytest.fixture
def small_runs(monkeypatch):
    """Runs of a few rows, merged three at a time into two files at once: every path of the
    sink (spills, merged levels, files routed in groups) on a few hundred rows."""
    monkeypatch.setattr(error_sink, "RUN_BYTES", 2000)
    monkeypatch.setattr(error_sink, "RUNS_AT_ONCE", 3)
    monkeypatch.setattr(error_sink, "FILES_AT_ONCE", 2)


def _expected(rows: list[ErrorRow], rows_per_file: int) -> dict[str, bytes]:
    """Each errors file of `rows` as the Beam pipeline writes it: its rows at once."""
    count = error_file_count(len(rows), rows_per_file)
    return {
        error_file_name(index, count): error_file_bytes(
            r for r in rows if file_of(r, count) == index
        )
        for index in range(count)
    }


def _finished(sink: ErrorSink, staging: Path, rows_per_file: int) -> dict[str, bytes]:
    files, _ = sink.finish(rows_per_file)
    assert sorted(p.name for p in staging.iterdir()) == sorted(f.staged for f in files)
    assert [f.rows for f in files] == [
        len((staging / f.staged).read_bytes().splitlines()) for f in files
    ]
    return {f.file: (staging / f.staged).read_bytes() for f in files}


@pytest.mark.parametrize("rows_per_file", [1000, 60, 9])  # 1, 7 and 47 files
def test_spilled_runs_make_the_files_all_rows_at_once_make(tmp_path, small_runs, rows_per_file):
    rows = _rows(400)
    sink = ErrorSink(str(tmp_path))
    for row in rows:
        sink.add(row)
    assert len(list(tmp_path.glob(f"{RUN_PREFIX}*"))) > 3  # spilled, and merged a level up
    assert _finished(sink, tmp_path, rows_per_file) == _expected(rows, rows_per_file)


def test_rows_leave_memory_for_staging_as_they_arise(tmp_path, small_runs):
    """At any time, all but the last RUN_BYTES of lines taken are in runs in staging."""
    sink = ErrorSink(str(tmp_path))
    taken = 0
    for row in _rows(300):
        sink.add(row)
        taken += len(row.to_json()) + 1
        spilled = sum(path.stat().st_size for path in tmp_path.glob(f"{RUN_PREFIX}*"))
        assert taken - spilled <= error_sink.RUN_BYTES + len(row.to_json()) + 1
    assert spilled > taken / 2


def test_a_workers_rows_are_adopted_as_if_taken_here(tmp_path, small_runs):
    """A shard-writer process's sink hands its runs and its last lines to its parent's."""
    rows = _rows(300)
    parent, worker = ErrorSink(str(tmp_path)), ErrorSink(str(tmp_path))
    for index, row in enumerate(rows):
        (parent if index % 3 else worker).add(row)
    spilled = worker.spilled()
    assert spilled.runs and spilled.lines
    assert ErrorCounts.of(spilled.tally) == count_errors(rows[::3])
    assert worker.spilled() == ((), (), Counter())  # handed over: emptied
    parent.adopt(spilled)
    assert _finished(parent, tmp_path, 50) == _expected(rows, 50)
    assert list(parent.passed([1, rows[0], spilled._replace(runs=()), 2])) == [1, 2]


@pytest.mark.slow
def test_runs_on_a_bucket_make_the_same_files(tmp_path, small_runs, gcs, monkeypatch):
    """Staging on gs://: runs written, read back by ranged reads, deleted; few files at once."""
    monkeypatch.setattr(error_sink, "REMOTE_FILES_AT_ONCE", 2)
    rows = _rows(150)
    staging = f"gs://tfrp-test/{tmp_path.name}/staging"
    sink = ErrorSink(staging)
    for row in rows:
        sink.add(row)
    files, _ = sink.finish(20)
    prefix = f"{tmp_path.name}/staging/"
    left = sorted(blob.name.removeprefix(prefix) for blob in gcs.bucket.list_blobs(prefix=prefix))
    assert left == sorted(f.staged for f in files)
    written = {f.file: fileio.read_bytes(f"{staging}/{f.staged}") for f in files}
    assert written == _expected(rows, 20) and len(written) == 9


def test_no_rows_make_one_empty_file(tmp_path):
    files, counts = ErrorSink(str(tmp_path)).finish(10)
    assert [(f.file, f.rows) for f in files] == [(error_file_name(0, 1), 0)] and not counts.total
    assert (tmp_path / files[0].staged).read_bytes() == b""


def _bad_rows_manifest(root: Path) -> Path:
    """A manifest of many error rows of several reasons among good ones: repeated keys,
    repeated bytes under other keys (--dedup), missing files, empty labels, bad splits."""
    rows = make_images(root, per_class=3)
    good = [row["image_uri"] for row in rows]
    for i in range(120):
        rows.append({"image_uri": good[i % len(good)], "label": "coffee"})  # duplicate_key
        rows.append({"image_uri": good[i % 3], "label": "x", "key": f"copy-{i}"})  # content
        rows.append({"image_uri": f"images/gone-{i}.jpg", "label": "rocket"})  # missing_file
        rows.append({"image_uri": good[i % len(good)], "label": "", "key": f"e-{i}"})
        rows.append({"image_uri": f"images/s-{i}.jpg", "label": "x", "split": f"bad split {i}"})
    return write_manifest(root / "m.csv", rows)


def _errors_of(version: Path) -> dict[str, bytes]:
    files = version_files(version)
    info = json.loads(files["tfrecord_pipeline.json"])
    return {
        "listed": json.dumps([info["error_files"], info["errors_by_reason"]]).encode(),
        **{name: data for name, data in files.items() if name.startswith("errors/")},
    }


@pytest.mark.slow
def test_the_local_runner_writes_the_beam_pipelines_errors_files(tmp_path, monkeypatch):
    """Rows from every step that rejects them (manifest, --dedup, the shard writers in their
    processes), spilled a few at a time on the local runner, merged into the same bytes."""
    manifest = _bad_rows_manifest(tmp_path)
    monkeypatch.setattr(error_sink, "RUN_BYTES", 3000)
    monkeypatch.setattr(error_sink, "RUNS_AT_ONCE", 4)
    monkeypatch.setattr(error_sink, "FILES_AT_ONCE", 2)
    monkeypatch.setattr(error_files, "ROWS_PER_ERRORS_FILE", 40)  # 15 files
    argv = ["convert", "--manifest", str(manifest), "--max_error_rate", "1", "--dedup"]
    argv += ["--no_progress", "--num_shards", "3"]
    assert main([*argv, "--output", str(tmp_path / "local"), "--processes", "2"]) == 0
    assert main([*argv, "--output", str(tmp_path / "beam"), *BEAM]) == 0
    local, beam = published(tmp_path / "local"), published(tmp_path / "beam")
    assert _errors_of(local) == _errors_of(beam)
    reasons = json.loads(_errors_of(local)["listed"])[1]
    assert set(reasons) >= {"duplicate_key", "duplicate_content", "missing_file", "bad_label"}
    assert sum(reasons.values()) == 600
    assert len(_errors_of(local)) - 1 == error_file_count(600, 40) == 15


def _start(tmp_path: Path, manifest: Path, root: Path) -> subprocess.Popen:
    argv = ["convert", "--no_progress", "--manifest", manifest, "--output", root]
    return subprocess.Popen(
        [COMMAND, *map(str, argv), "--max_error_rate", "1", "--processes", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )


@pytest.mark.slow
def test_a_run_killed_with_rows_spilled_publishes_none_and_the_next_run_all(tmp_path):
    """Enough rows (one image 100,000 times) that a shard writer spills runs of them into
    staging; killed then, the run publishes nothing and the next one publishes every row."""
    (image,) = [row["image_uri"] for row in make_images(tmp_path, per_class=1)][:1]
    manifest = tmp_path / "m.csv"
    manifest.write_text("image_uri,label\n" + f"{image},coffee\n" * 100_000)
    root = tmp_path / "root"
    run = _start(tmp_path, manifest, root)
    deadline = time.monotonic() + 120
    while not list(root.glob(f"{STAGING}/*/{RUN_PREFIX}*")):
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "no run spilled"
        time.sleep(0.005)
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert not (root / POINTER).exists()
    assert not [p for p in root.glob(f"{VERSIONS}/**/*") if p.is_file()]
    again = _start(tmp_path, manifest, root)
    assert again.wait(timeout=300) == 0, again.communicate()
    version = published(root)
    lines = [
        line for path in (version / "errors").iterdir() for line in path.read_bytes().splitlines()
    ]
    assert len(lines) == 99_999 and verify(str(root)) == (1, [])
    assert not list(root.glob(f"{STAGING}/*/{RUN_PREFIX}*"))
