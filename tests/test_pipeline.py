"""The Beam steps with TestPipeline, and whole conversions run on a temp folder."""

import json
import multiprocessing
import threading
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from conftest import BEAM, encode, error_rows, make_images, photo, published, write_manifest

import pipeline
from pipeline.cli.main import main
from pipeline.dataset.metadata import INFO_FILE
from pipeline.dataset.publish import LOCK, MARKER, POINTER, STAGING, VERSIONS
from pipeline.read.verify import verify
from pipeline.runners.convert import run
from transforms.beam.coders import RowBatch
from transforms.beam.manifests import ReadManifests
from transforms.beam.plan import AssignShards
from transforms.beam.shards import WriteShards
from transforms.errors import ErrorRow
from transforms.manifest.labels import LabelMap
from transforms.manifest.lines import QUOTED_NEWLINE
from transforms.manifest.rows import ManifestRow, ReadConfig, row_position
from transforms.manifest.sources import check_manifests, read_all, read_piece
from transforms.plan.dataset import DatasetPlan
from transforms.plan.sharding import ShardId, shard_for
from transforms.write import error_files
from transforms.write.shard_writer import WriteConfig, write_shard

pytestmark = pytest.mark.slow


def _read(output, name):
    return (output / name).read_bytes()


def test_read_manifests_and_assign_shards(tmp_path):
    manifest = write_manifest(
        tmp_path / "m.csv",
        [
            {"image_uri": "a.jpg", "label": "cat"},
            {"image_uri": "b.jpg", "label": "dog"},
            {"image_uri": "c.jpg", "label": ""},
        ],
    )
    plan = DatasetPlan(LabelMap(("cat",)), (("train", 2),), (("train", 4),))
    with BeamTestPipeline() as p:
        read = p | ReadManifests(check_manifests([str(manifest)], ReadConfig()), ReadConfig())
        keyed = read["rows"] | AssignShards(p | "Plan" >> beam.Create([plan]))
        shards = keyed.keyed | beam.FlatMap(lambda kv: [(kv[0], row.key) for row in kv[1].rows])
        assert_that(shards, equal_to([((*shard_for("a.jpg", "train", 4), 0, 1), "a.jpg")]))
        reasons = (
            (read["errors"], keyed.errors) | beam.Flatten() | beam.Map(lambda e: e.reason.value)
        )
        assert_that(reasons, equal_to(["bad_label", "unknown_label"]), label="Reasons")


def test_write_shard_keeps_first_duplicate_and_reports_bad_images(tmp_path):
    good = tmp_path / "good.jpg"
    good.write_bytes(encode(photo().resize((32, 32))))
    (tmp_path / "bad.jpg").write_bytes(encode(photo().resize((32, 32)))[:-100])

    def row(key, name, offset):
        return ManifestRow(
            key, str(tmp_path / name), "cat", "train", (), "m", row_position(0, offset)
        )

    rows = [row("k1", "good.jpg", 30), row("k1", "good.jpg", 20), row("k2", "bad.jpg", 40)]
    rows.append(row("k3", "missing.jpg", 50))
    out = list(
        write_shard(ShardId("train", 0, 1), rows, LabelMap(("cat",)), WriteConfig(str(tmp_path)))
    )
    result, errors = out[-1], out[:-1]
    assert result.records == 1 and result.label_counts == ((0, 1),)
    assert sorted((e.key, e.reason.value, e.source) for e in errors) == [
        ("k1", "duplicate_key", "m@30"),
        ("k2", "corrupt_image", "m@40"),
        ("k3", "missing_file", "m@50"),
    ]
    # The attempt's own file in the staging folder, under a name no other attempt uses.
    assert result.staged.startswith(f"{result.file}.") and result.staged != result.file
    staged = sorted(p.name for p in tmp_path.glob(f"{result.file}*"))
    assert staged == [result.staged, f"{result.staged}.rows"]
    assert (tmp_path / result.staged).stat().st_size == result.bytes


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
    flags = ("--num_shards", "2", "--split", "train=0.5,validation=0.5", "--no_progress",
             "--max_error_rate", "1", *image_flags)  # fmt: skip

    def convert(name, *more):
        run(["--manifest", str(dataset), "--output", str(tmp_path / name), *flags, *more])
        root = tmp_path / name
        assert sorted(p.name for p in root.iterdir()) == [LOCK, POINTER, STAGING, VERSIONS]
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


@pytest.mark.parametrize("compress", [False, True])
def test_a_shard_written_in_pieces_is_the_shard_written_whole(tmp_path, compress):
    """Pieces written apart (by other workers, in any order) and joined give the shard's
    bytes, its index, its rows file and its counts, as one writer would."""
    images = make_images(tmp_path, per_class=6)
    rows = [
        ManifestRow(
            f"k{n}", str(tmp_path / image["image_uri"]), image["label"], "train", (), "m", n
        )
        for n, image in enumerate(images)
    ]
    rows.append(rows[3]._replace(position=99))  # a duplicate key: an error in its piece
    labels = LabelMap(tuple(sorted({row.label for row in rows})))
    staging = tmp_path / "staging"
    config = WriteConfig(str(staging), compress=compress, write_index=not compress)
    *whole_errors, whole = write_shard(ShardId("train", 0, 1), rows, labels, config)
    plan = DatasetPlan(labels, (("train", len(rows)),), (("train", 1),), (("train", 4),))

    def same_as_whole(results):
        [joined] = results
        assert joined.piece == (0, 1)
        assert (staging / joined.staged).read_bytes() == (staging / whole.staged).read_bytes()
        for suffix in [".rows", *([] if compress else [".idx"])]:
            text = (staging / (joined.staged + suffix)).read_text()
            assert text == (staging / (whole.staged + suffix)).read_text()
        assert joined._replace(staged=whole.staged) == whole

    with BeamTestPipeline() as p:
        batches = p | "Rows" >> beam.Create([RowBatch(tuple(rows))])
        plan_input = p | "Plan" >> beam.Create([plan])
        shards = (batches | AssignShards(plan_input)).keyed | WriteShards(plan_input, config)
        assert_that(shards["shards"], same_as_whole)
        errors = shards["errors"] | beam.Map(lambda e: (e.key, e.reason.value))
        assert_that(errors, equal_to([(e.key, e.reason.value) for e in whole_errors]), "Errors")
    assert len(list(staging.glob("train-*.rows"))) == 1 + 4 + 1  # whole, 4 pieces, joined


def test_beam_writes_large_shards_in_pieces_with_the_local_runners_bytes(dataset, tmp_path):
    flags = ("--num_shards", "1", "--target_shard_mb", "0.01", "--no_progress")
    local = run(["--manifest", str(dataset), "--output", str(tmp_path / "a"), *flags])
    beam_run = run(["--manifest", str(dataset), "--output", str(tmp_path / "b"), *flags, *BEAM])
    first, other = Path(local.folder), Path(beam_run.folder)
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert sorted(p.relative_to(other) for p in other.rglob("*") if p.is_file()) == files
    for name in files:
        assert _read(first, name) == _read(other, name), name


def test_the_python_api_takes_the_shard_count_as_a_number(dataset, tmp_path):
    """`num_shards=2` is `--num_shards 2`: the same files, the recorded options included."""
    flags = ["--manifest", str(dataset), "--split", "train=0.5,validation=0.5", "--no_progress"]
    run([*flags, "--output", str(tmp_path / "flag"), "--num_shards", "2"])
    options = pipeline.ConvertOptions(
        manifest=[str(dataset)], output=str(tmp_path / "api"), num_shards=2,
        split="train=0.5,validation=0.5", progress=False,
    )  # fmt: skip
    assert pipeline.convert(options).info.splits["validation"].shards[1].records

    def files(root):
        version = published(root)
        return {p.relative_to(version): p.read_bytes() for p in version.rglob("*") if p.is_file()}

    assert files(tmp_path / "api") == files(tmp_path / "flag")


def test_local_children_are_forks_only_while_no_other_thread_runs(dataset, tmp_path, monkeypatch):
    """A fork copies whatever lock another thread holds: with a thread running (as in a
    notebook), the local runner's children are fresh interpreters, and the bytes the same."""
    from transforms.write import shard_processes

    methods = []  # how each run's shard-writer processes start
    real = multiprocessing.get_context
    monkeypatch.setattr(multiprocessing, "get_context", lambda m: methods.append(m) or real(m))
    flags = ("--num_shards", "4", "--processes", "2", "--no_progress")

    def convert(name):
        run(["--manifest", str(dataset), "--output", str(tmp_path / name), *flags])
        shards = {p.name: p.read_bytes() for p in published(tmp_path / name).glob("*.tfrecord")}
        assert len(shards) == 4
        return shards

    alone = convert("alone") if shard_processes.only_thread() else None
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        beside_a_thread = convert("beside")
    finally:
        stop.set()
        other.join()
    assert methods[-1] == "forkserver"  # no fork with the other thread running
    if alone is not None:  # no thread ran here, native ones included: the first run forked
        assert methods == ["fork", "forkserver"] and alone == beside_a_thread


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
        "bad_split": 1, "corrupt_image": 1, "duplicate_key": 1,
        "empty_file": 1, "missing_file": 1, "not_an_image": 1,
    }  # fmt: skip
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


def _manifests_with_every_kind_of_line(folder) -> list[str]:
    """A CSV (CRLF, quotes, blank and bad lines, a BOM), a JSONL and a Parquet manifest."""
    csv_lines = [
        "image_uri,label,key",
        "a.jpg,cat,",
        "",
        '"b,1.jpg","dog",k2',
        "c.jpg",
        '"d.jpg","two',
        'lines"',
        "e.jpg,cat,k5,extra",
        "\xe9.jpg,\xe9l\xe8ve,",
    ]
    csv_body = "\r\n".join(csv_lines).encode("utf-8-sig") + b"\r\nf.jpg,\xff\r\n" + b"g.jpg,cat"
    (folder / "m.csv").write_bytes(csv_body)
    jsonl = [{"image_uri": f"{i}.jpg", "label": i % 3} for i in range(40)]
    lines = [json.dumps(row) for row in jsonl] + ["{not json", "", '{"label": "x"}', "[1]"]
    (folder / "m.jsonl").write_text("\n".join(lines))
    table = pa.table({"url": [f"p{i}.jpg" for i in range(50)], "label": [i % 4 for i in range(50)]})
    pq.write_table(table, folder / "m.parquet", row_group_size=3)
    return [str(folder / name) for name in ("m.csv", "m.jsonl", "m.parquet")]


@pytest.mark.parametrize("piece_bytes", [1, 5])
def test_the_splittable_read_in_tiny_pieces_gives_the_rows_of_a_whole_read(tmp_path, piece_bytes):
    """Files cut into pieces of a few bytes (hundreds of them, each line or row group read by
    the piece it begins in) give exactly what the local runner's one read of each file gives."""
    config = ReadConfig()
    manifests = check_manifests(_manifests_with_every_kind_of_line(tmp_path), config)
    whole = [item for manifest in manifests for item in read_all(manifest, config)]
    rows = [item for item in whole if isinstance(item, ManifestRow)]
    errors = [item for item in whole if isinstance(item, ErrorRow)]
    assert (len(rows), len(errors)) == (4 + 40 + 50, 5 + 3)
    assert all(manifest.size > 10 * piece_bytes for manifest in manifests)
    p = BeamTestPipeline()
    read = p | ReadManifests(manifests, config, piece_bytes)
    assert_that(read["rows"] | beam.FlatMap(lambda batch: batch.rows), equal_to(rows))
    assert_that(read["errors"], equal_to(errors), label="Errors")
    result = p.run()
    result.wait_until_finish()
    (pieces,) = result.metrics().query(MetricsFilter().with_name("manifest_pieces"))["counters"]
    assert pieces.committed >= sum(manifest.size for manifest in manifests) // piece_bytes // 2


@pytest.mark.parametrize("name", ["m.csv", "m.jsonl", "m.parquet"])
def test_a_piece_split_while_it_is_read_gives_every_row_once(tmp_path, name):
    """A runner may cut a piece being read at any byte past what the reader has claimed (here
    half-way through what is left, after 3 records): the reader stops at the cut, and the
    range beyond it, read on its own, gives the rest."""
    config = ReadConfig()
    paths = _manifests_with_every_kind_of_line(tmp_path)
    (manifest,) = check_manifests([p for p in paths if p.endswith(name)], config)
    whole = list(read_all(manifest, config))
    tracker = OffsetRestrictionTracker(OffsetRange(manifest.body, manifest.size))
    read, residual = [], None
    for item in read_piece(manifest, manifest.body, manifest.size, config, tracker.try_claim):
        read.append(item)
        if len(read) == 3:
            _, residual = tracker.try_split(0.5)
    tracker.check_done()
    rest = OffsetRestrictionTracker(residual)
    read += read_piece(manifest, residual.start, residual.stop, config, rest.try_claim)
    rest.check_done()
    assert read == whole and residual.start < manifest.size


def test_the_cli_reads_hostile_manifest_lines_alike_in_pieces_and_whole(tmp_path, monkeypatch):
    """Through the command line: a CSV whose lines break every rule, read whole by the local
    runner and in pieces of 16 bytes on the DirectRunner, gives the same files, byte for
    byte; each bad line is an error row named by its byte offset."""
    rows = make_images(tmp_path, per_class=2)
    body = "image_uri,label\r\n" + "".join(f"{r['image_uri']},{r['label']}\r\n" for r in rows)
    hostile = [b'"images/x.jpg","two', b'lines"', b"images/\xff.jpg,cat", b"", b"a,b,c"]
    manifest = tmp_path / "m.csv"
    manifest.write_bytes(body.encode() + b"\r\n".join(hostile) + b"\r\nimages/last.jpg,cat")
    monkeypatch.setattr("transforms.beam.manifests.PIECE_BYTES", 16)
    for name, runner in (("local", []), ("beam", BEAM)):
        argv = ["convert", "--manifest", str(manifest), "--output", str(tmp_path / name),
                "--max_error_rate", "1", "--no_progress", *runner]  # fmt: skip
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
        (f"{manifest}@{offsets[4] + 7}", "missing_file",
         f"no such file: {tmp_path}/images/last.jpg"),
    }  # fmt: skip
