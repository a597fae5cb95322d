"""Incremental refresh: pure decisions, then real refreshes read back with TensorFlow's reader."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import (
    RUNNERS,
    arguments,
    command,
    make_images,
    read_manifest,
    write_manifest,
)

from tfrecord_pipeline.dataset.labels_file import label_names
from tfrecord_pipeline.dataset.previous import Previous
from tfrecord_pipeline.dataset.versions import resolve
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.local import row_buckets
from tfrecord_pipeline.transforms.local.refresh import refresh_here
from tfrecord_pipeline.transforms.local.row_buckets import RowBuckets
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.fingerprints import row_fingerprint
from tfrecord_pipeline.transforms.plan.refresh import (
    NewRows,
    PastShard,
    RefreshCounts,
    compaction_groups,
    delta_shards,
    refresh_layout,
    shifted_index,
    spread,
)
from tfrecord_pipeline.transforms.plan.rows_files import (
    DamagedRowsFileError,
    PastRecord,
    parse_rows,
    read_rows_file,
    rows_line,
)
from tfrecord_pipeline.transforms.plan.sharding import ShardId


def _row(key: str, image: str = "", label: str = "cat", split: str = "train") -> ManifestRow:
    return ManifestRow(key, image or key, label, split, (), "m.csv", 0)


def test_rows_files_hold_any_key_on_one_line():
    records = [
        PastRecord('a,"b"\tc\nd', "0123456789abcdef", (3,)),
        PastRecord("é", "f", (-1,)),
        PastRecord("several", "f", (2, 7)),
        PastRecord("none", "f", ()),
    ]
    assert parse_rows("".join(map(rows_line, records))) == records


def _plan(*splits: tuple[str, int, int]) -> DatasetPlan:
    """A full conversion's plan: (split, rows, shards) each."""
    rows = tuple((split, count) for split, count, _ in splits)
    return DatasetPlan(None, rows, tuple((split, shards) for split, _, shards in splits))


def test_the_layout_names_every_shard_before_anything_is_written():
    past = [
        PastShard("train", "train-00000-of-00003.tfrecord", 10, 10, True),  # carried whole
        PastShard("train", "train-00001-of-00003.tfrecord", 10, 0, True),  # every row changed
        PastShard("train", "train-00002-of-00003.tfrecord", 10, 9, True),  # one row gone
        PastShard("test", "test-00000-of-00001.tfrecord", 4, 4, False),  # damaged
    ]
    layout = refresh_layout(
        _plan(("train", 40, 3), ("test", 4, 1), ("new", 30, 2)), past, {"train": 21, "test": 4}
    )
    shards = {final.shard: final.sources for final in layout.shards}
    new = ShardId("train", 0, 2), ShardId("train", 1, 2)
    assert shards == {
        ShardId("train", 0, 4): (past[0],),
        ShardId("train", 1, 4): (past[2],),
        ShardId("train", 2, 4): (NewRows(new[0]),),
        ShardId("train", 3, 4): (NewRows(new[1]),),
        ShardId("test", 0, 1): (NewRows(ShardId("test", 0, 1)),),
        ShardId("new", 0, 2): (NewRows(ShardId("new", 0, 2)),),  # as a full conversion
        ShardId("new", 1, 2): (NewRows(ShardId("new", 1, 2)),),
    }
    assert layout.plan.shards == (("train", 4), ("test", 1), ("new", 2))
    assert layout.write_plan.shards == (("train", 2), ("test", 1), ("new", 2))
    damaged = ("test-00000-of-00001.tfrecord",)
    assert layout.counts == RefreshCounts(10, 9, 25, damaged, 4, 11, 1, 1, 5)
    assert list(layout.past_sources()) == [
        (past[0], ShardId("train", 0, 4)),
        (past[2], ShardId("train", 1, 4)),
    ]


def test_small_shards_are_compacted_in_the_layout():
    past = [
        PastShard("train", f"train-{i}", 100, kept, True) for i, kept in enumerate((100, 10, 30))
    ]
    layout = refresh_layout(_plan(("train", 160, 3)), past, {"train": 20})
    assert [final.sources for final in layout.shards] == [
        (past[0],),
        (past[1], past[2], NewRows(ShardId("train", 0, 1))),
    ]


def test_delta_shards_match_the_past_fill_and_compaction_packs_small_shards():
    four = [PastShard("train", f"s{i}", 250, 0, True) for i in range(4)]
    assert delta_shards(0, four) == 0
    assert delta_shards(10, four) == 1 and delta_shards(750, four) == 3
    sparse = [PastShard("train", "s", 3, 0, True), *[PastShard("train", "s", 0, 0, True)] * 7]
    assert delta_shards(3, sparse) == 3  # never more shards than rows
    assert spread(7, 3) == [3, 2, 2]
    assert compaction_groups([100, 100, 10]) == []  # one small shard: nothing to gain
    assert compaction_groups([100, 100, 10, 30, 20]) == [[2, 3, 4]]
    assert compaction_groups([100, 40, 40, 40, 10]) == [[1, 2], [3, 4]]
    assert shifted_index(["0 10\n10 5\n", "0 7\n"], [15, 7]) == "0 10\n10 5\n15 7\n"


def test_the_fingerprint_changes_with_what_makes_the_record(tmp_path):
    image = tmp_path / "a.jpg"
    image.write_bytes(b"x" * 10)
    os.utime(image, ns=(1, 1))
    row = _row("a", str(image))
    first = row_fingerprint(row)
    assert first == row_fingerprint(row) and len(first) == 16
    assert row_fingerprint(row._replace(label="dog")) != first
    assert row_fingerprint(row._replace(split="validation")) != first
    assert row_fingerprint(row._replace(features=(("w", 1),))) != first
    os.utime(image, ns=(2, 2))
    assert row_fingerprint(row) != first
    assert row_fingerprint(_row("a", str(tmp_path / "missing.jpg"))) == ""


def _records(folder: str) -> set[tuple[str, int, str]]:
    """(key, label id, sha256 of the stored image) of every record, read with TensorFlow."""
    import tensorflow as tf

    spec = {
        "image/source_id": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
    }
    found = set()
    files = sorted(tf.io.gfile.glob(f"{folder}/train-*"))
    compression = "GZIP" if files[0].endswith(".gz") else ""
    for record in tf.data.TFRecordDataset(files, compression_type=compression):
        example = tf.io.parse_single_example(record, spec)
        image = hashlib.sha256(example["image/encoded"].numpy()).hexdigest()
        found.add(
            (example["image/source_id"].numpy().decode(), int(example["image/class/label"]), image)
        )
    return found


def _convert(manifest: Path, output: Path, *flags: str):
    argv = ["--manifest", str(manifest), "--output", str(output), "--no_progress"]
    return run([*argv, "--num_shards", "4", *flags])


@pytest.fixture
def rows(tmp_path) -> list[dict]:
    return make_images(tmp_path, per_class=10)


@pytest.mark.parametrize(
    ("compression", "runner"), [("none", "local"), ("gzip", "local"), ("none", "beam")]
)
def test_a_refresh_equals_a_full_conversion_and_rereads_only_what_changed(
    tmp_path, rows, compression, runner
):
    flags = ("--compression", compression, "--num_shards", "8", *RUNNERS[runner])
    older = [row for index, row in enumerate(rows) if index % 10 != 3]  # some rows are new
    root = tmp_path / "nightly"
    first = _convert(write_manifest(tmp_path / "older.csv", older), root, *flags)
    # Since then: two rows removed, one image replaced (new bytes and time), and one image's
    # bytes overwritten keeping its size and time, which a refresh cannot see and keeps.
    current = [row for row in rows if row not in older[:2]]
    changed, unseen = tmp_path / current[5]["image_uri"], tmp_path / current[6]["image_uri"]
    shutil.copy(tmp_path / current[7]["image_uri"], changed)
    status = unseen.stat()
    unseen.write_bytes(bytes(status.st_size))
    os.utime(unseen, ns=(status.st_atime_ns, status.st_mtime_ns))
    manifest = write_manifest(tmp_path / "current.csv", current)

    refreshed = _convert(manifest, root, *flags, "--incremental")
    assert not refreshed.info.failures and resolve(str(root)).folder == refreshed.folder
    assert verify(str(root), "all") == (len(current), [])
    full = _convert(manifest, tmp_path / "full", *flags)
    kept_stale = {r for r in _records(first.folder) if r[0] == current[6]["image_uri"]}
    expected = {r for r in _records(full.folder) if r[0] != current[6]["image_uri"]} | kept_stale
    assert _records(refreshed.folder) == expected
    # Untouched shards are carried: the published files' bytes, in files of their own.
    published = {
        path.read_bytes(): path.stat().st_ino for path in Path(first.folder).glob("train-*")
    }
    carried = [
        path for path in Path(refreshed.folder).glob("train-*") if path.read_bytes() in published
    ]
    assert carried and all(path.stat().st_ino != published[path.read_bytes()] for path in carried)
    assert verify(first.folder, "all") == (len(older), [])  # the old version is untouched


def test_label_ids_never_change_and_new_labels_are_appended_or_refused(tmp_path, rows):
    root = tmp_path / "nightly"
    without_astronaut = [row for row in rows if row["label"] != "astronaut"]
    first = _convert(write_manifest(tmp_path / "a.csv", without_astronaut), root)
    names = label_names(first.folder, first.info)
    manifest = write_manifest(tmp_path / "b.csv", rows)  # "astronaut" sorts first
    argv = arguments(
        "--manifest {m} --output {root} --no_progress --incremental --freeze_labels"
        " --max_error_rate 1",
        m=manifest,
        root=root,
    )
    frozen = run(argv)
    assert frozen.info.errors_by_reason == {"unknown_label": 10}
    grown = _convert(manifest, root, "--incremental")
    assert label_names(grown.folder, grown.info) == [*names, "astronaut"]
    by_key = {key: label for key, label, _ in _records(grown.folder)}
    assert all(by_key[key] == label for key, label, _ in _records(first.folder))
    full = _convert(manifest, root)  # a full conversion into the root inherits them too
    assert label_names(full.folder, full.info) == [*names, "astronaut"]


def test_small_shards_are_compacted_after_refreshes(tmp_path, rows):
    root = tmp_path / "nightly"
    _convert(write_manifest(tmp_path / "m0.csv", rows[:24]), root)
    for step in range(1, 5):  # four nights, a few new rows each
        manifest = write_manifest(tmp_path / f"m{step}.csv", rows[: 24 + 4 * step])
        refreshed = _convert(manifest, root, "--incremental")
        assert verify(str(root), "none") == (24 + 4 * step, [])
    shards = [shard.records for shard in refreshed.info.splits["train"].shards]
    assert len(shards) < 4 + 4 and sum(shards) == 40


def test_incompatible_options_convert_everything_and_say_why(tmp_path, rows, capfd):
    root = tmp_path / "nightly"
    manifest = write_manifest(tmp_path / "m.csv", rows)
    _convert(manifest, root)
    refreshed = _convert(manifest, root, "--incremental", "--jpeg_quality", "80")
    assert "converting every row" in capfd.readouterr().err and refreshed.info.records == 40


def test_a_shard_count_a_refresh_does_not_apply_is_said(tmp_path, rows):
    """--num_shards 5 on a refresh of a 2-shard version kept 2 shards, and said nothing."""
    root, manifest = tmp_path / "nightly", write_manifest(tmp_path / "m.csv", rows)
    argv = ["convert", "--manifest", manifest, "--output", root, "--no_progress"]
    assert command(*argv, "--num_shards", "2").returncode == 0
    done = command(*argv, "--incremental", "--num_shards", "5")
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "tfrecord-pipeline: warning: split 'train' has 2 shards, not the 5 --num_shards asks: a "
        "refresh keeps the published shards and adds new ones; a run without --incremental "
        "applies it\n"
    )
    shards = json.loads(resolve(str(root)).info_text)["splits"]["train"]["shards"]
    assert len(shards) == 2
    again = command(*argv, "--incremental", "--num_shards", "2")
    assert again.returncode == 0 and again.stderr == "", again.stderr


def test_a_refresh_s_empty_new_shard_is_explained_as_one(tmp_path, rows):
    """New rows whose files are all missing leave the refresh's new shard empty: the warning
    advised --num_shards train=N "or fewer" with N above the shards there were."""
    root = tmp_path / "nightly"
    argv = ["convert", "--output", root, "--no_progress", "--max_error_rate", "0.5"]
    assert command(*argv, "--manifest", write_manifest(tmp_path / "a.csv", rows)).returncode == 0
    gone = [{"image_uri": f"images/gone/{n}.jpg", "label": "astronaut"} for n in range(3)]
    manifest = write_manifest(tmp_path / "b.csv", rows + gone)
    done = command(*argv, "--manifest", manifest, "--incremental")
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith(
        "of them empty: some readers fail on an empty shard (a refresh's new shard whose rows "
        "were all rejected stays empty until the next refresh; a run without --incremental "
        "leaves none)\n"
    )


def test_another_label_offset_is_refused_once_a_version_exists(tmp_path, rows):
    from tfrecord_pipeline.transforms.errors import UserError

    root = tmp_path / "nightly"
    manifest = write_manifest(tmp_path / "m.csv", rows)
    _convert(manifest, root, "--label_offset", "1")
    with pytest.raises(UserError, match="label ids never change"):
        _convert(manifest, root, "--label_offset", "2")
    assert _convert(manifest, root).info.labels["offset"] == 1  # no offset given: inherited


def test_every_file_of_a_refreshed_version_is_on_the_disk_before_it_is_published(
    tmp_path, rows, monkeypatch
):
    """A crash just after publication must find the version whole: every file in it (carried
    by a link, written again, or new) flushed to the disk before the pointer names it. One
    shard writer, in this process, so that every flush is seen."""
    flushed: list[tuple[int, int, str]] = []
    real_fsync = os.fsync

    def recorded(descriptor):
        status = os.fstat(descriptor)
        name = os.readlink(f"/proc/self/fd/{descriptor}")
        flushed.append((status.st_dev, status.st_ino, os.path.basename(name)))
        return real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recorded)
    root = tmp_path / "nightly"
    flags = ("--processes", "1", "--write_index")
    _convert(write_manifest(tmp_path / "a.csv", rows[:30]), root, *flags)
    kept = [row for index, row in enumerate(rows) if index % 7]  # every shard loses a row
    refreshed = _convert(write_manifest(tmp_path / "b.csv", kept), root, *flags, "--incremental")

    pointer = max(i for i, (*_, name) in enumerate(flushed) if name.startswith("LATEST.tmp-"))
    before = {(device, inode) for device, inode, _ in flushed[:pointer]}
    files = [path for path in Path(refreshed.folder).rglob("*") if path.is_file()]
    unflushed = [
        str(path.relative_to(refreshed.folder))
        for path in files
        if (path.stat().st_dev, path.stat().st_ino) not in before
    ]
    assert files and unflushed == []


def _flip(path: Path, at: int = 100) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_damaged_or_missing_shards_are_never_carried_their_rows_converted_again(
    tmp_path, rows, runner, capsys
):
    """A byte flipped in a shard that would be carried whole, a shard gone, and a damaged
    shard that would be rewritten (it lost a row): each one's unchanged rows are converted
    again from the manifest, the run says so and publishes a version that verifies."""
    from tfrecord_pipeline.cli.main import main

    root = tmp_path / "nightly"
    first = _convert(write_manifest(tmp_path / "a.csv", rows), root)
    folder = Path(first.folder)
    shards = [folder / shard.file for shard in first.info.splits["train"].shards]
    _flip(shards[0])
    shards[1].unlink()
    _flip(shards[2], at=-10)
    gone = (folder / first.info.splits["train"].shards[2].rows).read_text().split("\t")[2]
    gone = gone.split("\n")[0]  # the key of the rewritten shard's first record
    current = [row for row in rows if row["image_uri"] != gone]
    manifest = write_manifest(tmp_path / "b.csv", current)
    argv = ["convert", "--manifest", str(manifest), "--output", str(root), "--no_progress"]
    assert main([*argv, "--num_shards", "4", "--incremental", *RUNNERS[runner]]) == 0
    said = capsys.readouterr().out
    assert "damaged in the published version, not carried: 3 shards" in said
    new = resolve(str(root)).folder
    assert verify(str(root), "all") == (len(current), [])
    full = _convert(manifest, tmp_path / "full")
    assert _records(new) == _records(full.folder)
    info = json.loads((Path(new) / "tfrecord_pipeline.json").read_text())
    damaged = [path.name for path in shards[:3]]
    lost = sum(shard.records for shard in first.info.splits["train"].shards[:3]) - 1
    assert info["refresh"]["damaged"] == damaged and info["refresh"]["reconverted"] == lost
    assert f"their {lost} unchanged rows converted again" in said


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_a_write_into_the_old_version_never_changes_the_new_one(tmp_path, rows, runner):
    root = tmp_path / "nightly"
    first = _convert(write_manifest(tmp_path / "a.csv", rows[:30]), root, *RUNNERS[runner])
    refreshed = _convert(
        write_manifest(tmp_path / "b.csv", rows), root, "--incremental", *RUNNERS[runner]
    )
    assert refreshed.info.refresh["carried"] == 30
    for path in Path(first.folder).glob("train-*"):
        with open(path, "r+b") as handle:  # as root too, which a read-only mode would not stop
            handle.write(b"overwritten")
    assert verify(str(root), "all") == (len(rows), [])


def test_both_runners_refresh_a_version_into_the_same_files(tmp_path, rows):
    """Decided by one function from counts, a refresh names and fills every shard alike on the
    local runner and on Beam: the same files, byte for byte, with a damaged shard too."""
    first = _convert(write_manifest(tmp_path / "a.csv", rows[:30]), tmp_path / "local")
    _flip(Path(first.folder) / first.info.splits["train"].shards[0].file)
    shutil.copytree(tmp_path / "local", tmp_path / "beam", symlinks=True)
    manifest = write_manifest(tmp_path / "b.csv", rows[2:])
    files = {}
    for runner in RUNNERS:
        refreshed = _convert(manifest, tmp_path / runner, "--incremental", *RUNNERS[runner])
        folder = Path(refreshed.folder)
        files[runner] = {
            str(path.relative_to(folder)): path.read_bytes()
            for path in folder.rglob("*")
            if path.is_file() and path.name != "_COMMITTED"
        }
    assert files["local"] == files["beam"]


def _version_files(folder: str) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in Path(folder).rglob("*")
        if path.is_file() and path.name != "_COMMITTED"
    }


def test_a_rows_file_cut_midway_keeps_none_of_its_records_on_both_runners_alike(tmp_path, rows):
    """A rows file cut in the middle of a line: the records read before the cut were given to
    the match already (each runner reads a record at a time), and none may stay; its shard is
    damaged, its rows converted again, and both runners write the same files, byte for byte."""
    first = _convert(write_manifest(tmp_path / "a.csv", rows), tmp_path / "local")
    shard = first.info.splits["train"].shards[0]
    rows_file = Path(first.folder) / shard.rows
    text = rows_file.read_text()
    rows_file.write_text(text[: len(text) // 2])
    shutil.copytree(tmp_path / "local", tmp_path / "beam", symlinks=True)
    manifest = write_manifest(tmp_path / "b.csv", rows[1:])
    full = _records(_convert(manifest, tmp_path / "full").folder)
    files = {}
    for runner in RUNNERS:
        refreshed = _convert(manifest, tmp_path / runner, "--incremental", *RUNNERS[runner])
        assert refreshed.info.refresh["damaged"] == [Path(shard.file).name]
        assert _records(refreshed.folder) == full
        files[runner] = _version_files(refreshed.folder)
    assert files["local"] == files["beam"]


def test_a_local_refresh_matches_rows_and_records_in_buckets_spilled_to_disk(
    tmp_path, rows, monkeypatch
):
    """Rows (fingerprinted) and published records put in buckets by their key's hash, a few
    held: spilled, each bucket matched alone, the same decision as with every row held."""
    first = _convert(write_manifest(tmp_path / "a.csv", rows[:30]), tmp_path / "root")
    published = Previous(first.folder, first.info).published()
    current = [{**row, "label": "coffee"} if index == 9 else row for index, row in enumerate(rows)]
    read = read_manifest(write_manifest(tmp_path / "b.csv", current[2:]))
    manifest_rows = [row for row in read if isinstance(row, ManifestRow)]
    plan = _plan(("train", len(manifest_rows), 4))

    def decided(held_rows: int):
        with RowBuckets(held_rows) as buckets:
            update = refresh_here(plan, iter(manifest_rows), published, 1, buckets, [].append)
            spilled = bool(os.listdir(buckets.folder()))
            keys = sorted(row.key for row in update.to_convert)
        kept = {file: list(positions) for file, positions in update.kept.items()}
        return (update.layout, kept, keys, update.converted), spilled

    held, held_spilled = decided(10_000)
    monkeypatch.setattr(row_buckets, "GROUPED_ROWS", 3)
    spilled, spilled_spilled = decided(4)
    assert held == spilled and (held_spilled, spilled_spilled) == (False, True)
    assert held[3] == {"train": len(rows) - 30 + 1}  # the new rows and the changed one
    assert sum(map(len, held[1].values())) == 30 - 2 - 1  # two rows gone, one changed


def test_a_local_refresh_and_dedup_in_small_spilled_buckets_write_beams_files(
    tmp_path, rows, monkeypatch
):
    """--incremental --dedup on the local runner with a few rows held and a few to a bucket
    (rows, records and digests spilled to disk, matched and grouped a bucket at a time, in
    another order than they came): the same files as with every row held, and as on Beam."""
    copies = [{**row, "key": f"copy-{index}"} for index, row in enumerate(rows[:6])]
    flags = ("--dedup", "--max_error_rate", "1")
    local = ("--processes", "2")
    older = write_manifest(tmp_path / "a.csv", rows[:30] + copies[:3])
    first = _convert(older, tmp_path / "held", *flags)
    _flip(Path(first.folder) / first.info.splits["train"].shards[1].file)  # damaged
    for runner in ("spilled", "beam"):
        shutil.copytree(tmp_path / "held", tmp_path / runner, symlinks=True)
    current = [{**row, "label": "coffee"} if index == 9 else row for index, row in enumerate(rows)]
    manifest = write_manifest(tmp_path / "b.csv", current[2:] + copies)
    files = {}
    for runner, runner_flags in (("held", local), ("spilled", local), ("beam", RUNNERS["beam"])):
        if runner == "spilled":
            monkeypatch.setattr(row_buckets, "HELD_BYTES", 1_000)  # ~4 rows
            monkeypatch.setattr(row_buckets, "GROUPED_ROWS", 3)
        refreshed = _convert(manifest, tmp_path / runner, "--incremental", *flags, *runner_flags)
        # copy-0 and copy-1 stand for rows 0 and 1, now gone
        assert refreshed.info.errors_by_reason == {"duplicate_content": 4}
        files[runner] = _version_files(refreshed.folder)
    assert files["held"] == files["spilled"] == files["beam"]


def test_on_beam_an_unchanged_record_of_a_damaged_shard_is_counted_and_its_row_converted():
    """And one of a rows file found damaged midway (unlisted) is left out: its row converted."""
    from tfrecord_pipeline.transforms.beam.refresh import _keep_or_convert

    row = _row("a")
    for sound, converted in ((True, []), (False, [row])):
        grouped = {"rows": [(row, "fa")], "past": [("fa", "s0", 3, sound)]}
        outputs = list(_keep_or_convert(("a", grouped), {}))
        kept = [(out.tag, out.value) for out in outputs[:1]]
        assert kept == [("kept", ("s0", 3))] and outputs[1:] == converted
    grouped = {"rows": [(row, "fa")], "past": [("fa", "s0", 3, True)]}
    assert list(_keep_or_convert(("a", grouped), {"s0": True})) == [row]


def test_a_rows_file_is_read_as_it_is_asked_for_and_damage_is_raised_where_it_is(tmp_path):
    """Records come before the whole file is read: those before a bad line, then the error; a
    last line cut short and a count other than the shard's are damage too."""
    records = [PastRecord(f"k{i}", f"{i:064x}", (i % 3,)) for i in range(5)]
    path = tmp_path / "s.rows"
    lines = [rows_line(record) for record in records]
    path.write_text("".join([*lines[:2], "not a rows line\n", *lines[2:]]))
    listed = read_rows_file(str(path), 5)
    assert [next(listed), next(listed)] == records[:2]
    with pytest.raises(DamagedRowsFileError):
        next(listed)
    path.write_text("".join(lines)[:-1])
    with pytest.raises(DamagedRowsFileError, match="cut short"):
        list(read_rows_file(str(path), 5))
    path.write_text("".join(lines))
    assert list(read_rows_file(str(path), 5)) == records
    with pytest.raises(DamagedRowsFileError, match="lists 5 records, its shard 6"):
        list(read_rows_file(str(path), 6))
    with pytest.raises(DamagedRowsFileError):
        read_rows_file(str(tmp_path / "missing.rows"), 5)  # raised on opening


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_a_rows_file_damaged_midway_keeps_its_shard_from_being_carried(tmp_path, rows, runner):
    """A bad line in the middle of one shard's rows file, another's last line cut short: read
    a record at a time, their records given before the damage are left out of the match, the
    shards are not carried and their rows are converted again, as a full conversion does."""
    root = tmp_path / "nightly"
    first = _convert(write_manifest(tmp_path / "a.csv", rows), root)
    folder = Path(first.folder)
    files = [folder / shard.rows for shard in first.info.splits["train"].shards[:2]]
    lines = files[0].read_text().splitlines(keepends=True)
    middle = len(lines) // 2
    files[0].write_text("".join([*lines[:middle], "damaged\n", *lines[middle + 1 :]]))
    files[1].write_text(files[1].read_text()[:-1])
    manifest = write_manifest(tmp_path / "b.csv", rows[1:])
    refreshed = _convert(manifest, root, "--incremental", *RUNNERS[runner])
    damaged = [Path(shard.file).name for shard in first.info.splits["train"].shards[:2]]
    assert list(refreshed.info.refresh["damaged"]) == damaged
    assert _records(refreshed.folder) == _records(_convert(manifest, tmp_path / "full").folder)
