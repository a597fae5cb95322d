"""Whole conversions run on a temp folder, on both runners: the layout, identical bytes whatever
the runner, error rows and the gate, versions. (Each Beam step alone: tests/test_beam_*.py.)"""

import multiprocessing
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import (
    BEAM,
    arguments,
    encode,
    error_rows,
    make_images,
    photo,
    published,
    write_manifest,
)

import tfrecord_pipeline
from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.metadata import INFO_FILE
from tfrecord_pipeline.dataset.publish import LOCK
from tfrecord_pipeline.dataset.versions import MARKER, POINTER, PUBLISHED, STAGING, VERSIONS
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.manifest.lines import QUOTED_NEWLINE
from tfrecord_pipeline.transforms.plan import sharding
from tfrecord_pipeline.transforms.write import error_files

pytestmark = pytest.mark.slow


def _read(output, name):
    return (output / name).read_bytes()


def test_conversion_writes_the_documented_layout(dataset, convert):
    output, info = convert(dataset, "--num_shards", "3", "--split", "train=0.75,validation=0.25")
    names = sorted(p.name for p in output.iterdir())
    assert names == [
        MARKER,
        "dataset_info.json",  # TFDS's files: tests/test_tfds.py reads them with TFDS
        "errors",
        "features.json",
        "image.class.label.labels.txt",
        "labels.txt",
        "rows",  # what --incremental reads: tests/test_refresh.py
        INFO_FILE,
        *[f"train-0000{i}-of-00003.tfrecord" for i in range(3)],
        *[f"validation-0000{i}-of-00003.tfrecord" for i in range(3)],
    ]
    assert _read(output, "labels.txt") == b"astronaut\nchelsea\ncoffee\nrocket\n"
    assert info.records == 20 and info.errors == 0 and not info.failures
    assert sum(s.examples for s in info.splits.values()) == 20
    for split in info.splits.values():
        assert sum(s.records for s in split.shards) == split.examples
        assert sum(split.label_counts.values()) == split.examples


IMAGE_PATHS = {
    "pass-through": (),
    # libjpeg-turbo decodes and encodes, libvips resamples (transforms/image/fastpath.py)
    "resized": ("--resize_short_side", "40", "--jpeg_quality", "90"),
    "raw, grey": ("--max_side", "48", "--image_encoding", "raw", "--channels", "1"),
    "array_record": ("--file_format", "array_record"),  # the same records, another container
}


@pytest.mark.parametrize("image_flags", IMAGE_PATHS.values(), ids=IMAGE_PATHS.keys())
def test_same_input_gives_identical_bytes_whatever_the_runner_and_parallelism(
    dataset, tmp_path, monkeypatch, image_flags
):
    """The runner (local or Beam), threads per shard, shard-writer processes and Beam's worker
    processes must not change a byte, errors files included (several here), whether images
    pass through or are decoded, resized and encoded again."""
    monkeypatch.setattr(error_files, "ROWS_PER_ERRORS_FILE", 2)
    with open(dataset, "a") as manifest:  # rows rejected by the reader and by shard writers
        manifest.writelines(f"images/gone-{i}.jpg,coffee\n" for i in range(5))
        manifest.write("images/coffee/0.jpg,\n,rocket\n")
    flags = arguments(
        "--num_shards 2 --split train=0.5,validation=0.5 --no_progress --max_error_rate 1"
    )
    flags += image_flags

    def convert(name, *more):
        run(["--manifest", str(dataset), "--output", str(tmp_path / name), *flags, *more])
        root = tmp_path / name
        layout = [LOCK, POINTER, PUBLISHED, STAGING, VERSIONS]
        assert sorted(p.name for p in root.iterdir()) == layout
        assert not list((root / STAGING).iterdir())
        return published(root)

    first = convert("a", "--processes", "1")
    others = [
        convert("b", "--threads", "1"),
        convert("c", "--processes", "3", "--threads", "2"),
        convert("d", *BEAM),
        convert("e", "--direct_num_workers=2", "--direct_running_mode=multi_processing"),
    ]
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert len([name for name in files if name.parts[0] == "errors"]) == 4
    for other in others:
        assert sorted(p.relative_to(other) for p in other.rglob("*") if p.is_file()) == files
        for name in files:
            assert _read(first, name) == _read(other, name), name


@pytest.mark.parametrize("file_format", ["tfrecord", "array_record"])
def test_large_shards_written_in_pieces_on_either_runner_are_the_shards_written_whole(
    dataset, tmp_path, monkeypatch, file_format
):
    """--num_shards 1 beside a tiny --target_shard_mb: pieces on Beam, joined (an ArrayRecord
    shard's pieces written again, record by record, into one file); on the local runner, pieces
    for its processes, joined, each written in runs of a few rows, one after another; the same
    files as the shard written whole, by one process."""
    flags = ("--num_shards", "1", "--no_progress", "--file_format", file_format)
    pieces = (*flags, "--target_shard_mb", "0.01")
    whole = run(["--manifest", str(dataset), "--output", str(tmp_path / "whole"), *flags])
    monkeypatch.setattr(sharding, "MIN_SHARED_PIECE_ROWS", 2)
    monkeypatch.setattr(sharding, "MAX_RUN_ROWS", 3)
    runs = [
        whole,
        run(["--manifest", str(dataset), "--output", str(tmp_path / "a"), *pieces]),
        run(["--manifest", str(dataset), "--output", str(tmp_path / "b"), *pieces, *BEAM]),
    ]
    whole, local, beam = [Path(converted.folder) for converted in runs]
    files = sorted(p.relative_to(whole) for p in whole.rglob("*") if p.is_file())
    for other in (local, beam):
        assert sorted(p.relative_to(other) for p in other.rglob("*") if p.is_file()) == files
    for name in files:
        assert _read(local, name) == _read(beam, name), name
        if name.name not in (INFO_FILE, MARKER):  # they record --target_shard_mb
            assert _read(whole, name) == _read(local, name), name


def test_the_python_api_takes_the_shard_count_as_a_number(dataset, tmp_path):
    """`num_shards=2` is `--num_shards 2`: the same files, the recorded options included."""
    flags = ["--manifest", str(dataset), "--split", "train=0.5,validation=0.5", "--no_progress"]
    run([*flags, "--output", str(tmp_path / "flag"), "--num_shards", "2"])
    options = tfrecord_pipeline.ConvertOptions(
        manifest=[str(dataset)],
        output=str(tmp_path / "api"),
        num_shards=2,
        split="train=0.5,validation=0.5",
        progress=False,
    )
    assert tfrecord_pipeline.convert(options).info.splits["validation"].shards[1].records

    def files(root):
        version = published(root)
        return {p.relative_to(version): p.read_bytes() for p in version.rglob("*") if p.is_file()}

    assert files(tmp_path / "api") == files(tmp_path / "flag")


def test_the_commands_shard_writers_are_forks_and_a_programs_forkserver_ones(
    dataset, tmp_path, monkeypatch
):
    """A fork copies whatever lock another thread holds: a program importing the pipeline (a
    notebook, with threads of its own) gets forkserver workers; the command's own process,
    which starts no thread before its pool, forks them. The bytes are the same."""
    flags = ["--num_shards", "4", "--processes", "2", "--no_progress"]
    # The command as its entry point runs it, telling how its pool's workers start.
    told = (
        "import multiprocessing, sys\n"
        "real = multiprocessing.get_context\n"
        "multiprocessing.get_context = lambda m: print('start', m, file=sys.stderr) or real(m)\n"
        "from tfrecord_pipeline.cli.main import entry_point\n"
        "entry_point()\n"
    )
    argv = ["convert", "--manifest", dataset, "--output", tmp_path / "command", *flags]
    ran = subprocess.run(
        [sys.executable, "-c", told, *map(str, argv)], capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    assert "start fork\n" in ran.stderr and "forkserver" not in ran.stderr
    methods = []  # how this program's pool's workers start
    real = multiprocessing.get_context
    monkeypatch.setattr(multiprocessing, "get_context", lambda m: methods.append(m) or real(m))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        run(["--manifest", str(dataset), "--output", str(tmp_path / "program"), *flags])
    finally:
        stop.set()
        other.join()
    assert methods == ["forkserver"]

    def shards(name):
        return {p.name: p.read_bytes() for p in published(tmp_path / name).glob("*.tfrecord")}

    assert len(shards("command")) == 4 and shards("command") == shards("program")


def test_count_law_and_error_rows_with_hostile_rows(tmp_path, convert):
    rows = make_images(tmp_path, per_class=3)
    images = tmp_path / "images"
    (images / "truncated.jpg").write_bytes((images / "coffee/0.jpg").read_bytes()[:500])
    (images / "empty.jpg").write_bytes(b"")
    (images / "text.jpg").write_text("not an image")
    (images / "really_png.jpg").write_bytes(encode(photo().resize((40, 30)), "PNG"))
    rows += [
        {"image_uri": "images/truncated.jpg", "label": "coffee"},
        {"image_uri": "images/empty.jpg", "label": "coffee"},
        {"image_uri": "images/text.jpg", "label": "coffee"},
        {"image_uri": "images/nowhere.jpg", "label": "coffee"},
        {"image_uri": "images/really_png.jpg", "label": "coffee"},
        {"image_uri": "images/coffee/0.jpg", "label": "coffee"},  # same key again
        {"image_uri": "images/coffee/1.jpg", "label": "coffee", "split": "bad split"},
    ]
    manifest = write_manifest(tmp_path / "m.csv", rows)
    output, info = convert(manifest, "--max_error_rate", "0.5")
    assert info.rows_in == len(rows) == info.records + info.errors
    assert info.errors_by_reason == {
        "bad_split": 1,
        "corrupt_image": 1,
        "duplicate_key": 1,
        "empty_file": 1,
        "missing_file": 1,
        "not_an_image": 1,
    }
    assert len(error_rows(output)) == info.errors
    assert {e["row"]["image_uri"].rsplit("/", 1)[-1] for e in error_rows(output)} >= {
        "truncated.jpg",
        "empty.jpg",
        "text.jpg",
        "nowhere.jpg",
    }


def test_error_rate_over_the_limit_leaves_the_dataset_uncommitted(tmp_path, convert):
    rows = make_images(tmp_path, per_class=2)
    rows.append({"image_uri": "images/nowhere.jpg", "label": "coffee"})
    output, info = convert(write_manifest(tmp_path / "m.csv", rows))
    assert info.failures and "missing_file 1" in info.failures[0]
    assert not (output / MARKER).exists() and (output / INFO_FILE).exists()


def test_a_second_run_publishes_a_new_version_and_leaves_the_first_as_it_was(
    dataset, tmp_path, convert
):
    first, _ = convert(dataset, "--num_shards", "4")
    before = {p: p.read_bytes() for p in first.rglob("*") if p.is_file()}
    second, info = convert(dataset, "--num_shards", "2")
    assert second != first and second.parent == first.parent
    assert published(tmp_path / "out") == second
    assert sorted(p.name for p in second.glob("*.tfrecord")) == [
        "train-00000-of-00002.tfrecord",
        "train-00001-of-00002.tfrecord",
    ]
    assert (second / MARKER).exists() and info.records == 20
    assert {p: p.read_bytes() for p in first.rglob("*") if p.is_file()} == before
    assert verify(str(first)) == verify(str(tmp_path / "out")) == (20, [])


def test_the_cli_reads_hostile_manifest_lines_alike_in_pieces_and_whole(tmp_path, monkeypatch):
    """Through the command line: a CSV whose lines break every rule, read whole by the local
    runner and in pieces of 16 bytes on the DirectRunner, gives the same files, byte for
    byte; each bad line is an error row named by its byte offset."""
    rows = make_images(tmp_path, per_class=2)
    body = "image_uri,label\r\n" + "".join(f"{r['image_uri']},{r['label']}\r\n" for r in rows)
    hostile = [b'"images/x.jpg","two', b'lines"', b"images/\xff.jpg,cat", b"", b"a,b,c"]
    manifest = tmp_path / "m.csv"
    manifest.write_bytes(body.encode() + b"\r\n".join(hostile) + b"\r\nimages/last.jpg,cat")
    monkeypatch.setattr("tfrecord_pipeline.transforms.beam.manifests.PIECE_BYTES", 16)
    for name, runner in (("local", []), ("beam", BEAM)):
        argv = arguments(
            "convert --manifest {m} --output {out} --max_error_rate 1 --no_progress",
            m=manifest,
            out=tmp_path / name,
        )
        argv += runner
        assert main(argv) == 0
    local, beam = published(tmp_path / "local"), published(tmp_path / "beam")
    files = sorted(p.relative_to(local) for p in local.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(beam) for p in beam.rglob("*") if p.is_file())
    for name in files:
        assert _read(local, name) == _read(beam, name), name
    start = len(body)
    offsets = [start + sum(len(line) + 2 for line in hostile[:i]) for i in range(len(hostile))]
    assert {(e["source"], e["reason"], e["message"]) for e in error_rows(local)} == {
        (f"{manifest}@{offsets[0]}", "bad_row", QUOTED_NEWLINE),
        (f"{manifest}@{offsets[1]}", "bad_row", "image_uri and label are required"),
        (f"{manifest}@{offsets[2]}", "bad_row", "not UTF-8 text (bytes ff)"),
        (f"{manifest}@{offsets[4]}", "bad_row", "more cells than columns"),
        (
            f"{manifest}@{offsets[4] + 7}",
            "missing_file",
            f"no such file: {tmp_path}/images/last.jpg",
        ),
    }
