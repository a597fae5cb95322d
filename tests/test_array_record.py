"""`--file_format array_record`: ArrayRecord shards of the records a TFRecord conversion writes,
read as they are by TFDS's `as_data_source()` and `tfds.data_source`, and by Grain's
ArrayRecordDataSource in a shuffled, batched MapDataset; verify, preview, stats, load() and
--incremental on them. (Both runners' bytes: test_pipeline.py, test_portable.py; pieces joined:
test_shard_pieces.py, test_beam_shards.py.)"""

import csv
import errno
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import google_crc32c
import grain
import pytest
import tensorflow_datasets as tfds
from conftest import REPOSITORY, make_images, published, write_manifest

import tfrecord_pipeline.tfds  # noqa: F401 - registers "tfrecord_pipeline" with TFDS
from tfrecord_pipeline import load
from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.metadata import INFO_FILE, DatasetInfo
from tfrecord_pipeline.dataset.tfds_metadata import NAME
from tfrecord_pipeline.dataset.versions import resolve
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.tfrecord.proto.example_pb2 import Example
from tfrecord_pipeline.transforms.tfrecord.records import RecordError, file_crc32c
from tfrecord_pipeline.transforms.write.array_records import (
    ArrayRecordShardWriter,
    array_records_in,
    read_array_record_path,
)

SAMPLE = REPOSITORY / "sample" / "manifest.csv"
AS_ARRAY_RECORD = ("--file_format", "array_record")


def _written(path: str, records: list[bytes]) -> ArrayRecordShardWriter:
    writer = ArrayRecordShardWriter(path)
    for record in records:
        writer.write(record)
    writer.close()
    return writer


def test_a_shard_file_is_its_records_in_order_and_the_same_bytes_each_time(tmp_path):
    from array_record.python import array_record_module

    records = [f"record {n}".encode() * (n + 1) for n in range(300)]
    first = _written(str(tmp_path / "a.array_record"), records)
    again = _written(str(tmp_path / "b.array_record"), records)
    data = (tmp_path / "a.array_record").read_bytes()
    assert data == (tmp_path / "b.array_record").read_bytes()  # no timestamp, no host
    assert (first.records, first.bytes, first.crc32c) == (300, len(data), again.crc32c)
    assert first.crc32c == file_crc32c(google_crc32c.value(data))
    assert [record for _, record in array_records_in(io.BytesIO(data))] == records
    reader = array_record_module.ArrayRecordReader(str(tmp_path / "a.array_record"))
    assert "group_size:1" in reader.writer_options_string()  # one record a chunk
    assert reader.read([299, 7]) == [records[299], records[7]]  # any record read alone


def test_a_damaged_or_cut_file_is_a_record_error(tmp_path):
    _written(str(tmp_path / "a.array_record"), [os.urandom(500) for _ in range(50)])
    data = (tmp_path / "a.array_record").read_bytes()
    flipped = bytearray(data)
    flipped[1000] ^= 1
    for broken in (bytes(flipped), data[: len(data) // 2], b"not an array record"):
        with pytest.raises(RecordError):
            list(array_records_in(io.BytesIO(broken)))


def test_a_full_disk_is_the_fault_the_command_line_tells(tmp_path, capsys):
    """The writer says ENOSPC only in its message: it is raised as the OSError it is, and the
    command line's one line and exit status 3 follow."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)])
    if mounted.returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        with pytest.raises(OSError) as raised:
            _written(str(disk / "a.array_record"), [os.urandom(10_000) for _ in range(100)])
        assert raised.value.errno == errno.ENOSPC
        argv = ["convert", "--manifest", str(SAMPLE), "--output", str(disk / "root")]
        assert main([*argv, "--no_progress", *AS_ARRAY_RECORD]) == 3
        assert "no space left on the device" in capsys.readouterr().err
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=True)


def test_array_record_is_imported_only_when_asked_for(tmp_path):
    """Neither the package nor a TFRecord conversion loads it; TensorFlow, neither format."""
    script = (
        "import sys; from tfrecord_pipeline.cli.main import main; "
        f"assert main(['convert', '--manifest', {str(SAMPLE)!r}, '--no_progress', "
        "'--output', *sys.argv[1:]]) == 0; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'array_record', 'tensorflow'}))"
    )

    def loaded(*argv: str) -> str:
        done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.splitlines()[-1]

    assert loaded(str(tmp_path / "a")) == "[]"
    assert loaded(str(tmp_path / "b"), *AS_ARRAY_RECORD) == "['array_record']"


def _manifest_rows(path: Path) -> dict[str, str]:
    with open(path, newline="") as handle:
        return {row["image_uri"]: row["label"] for row in csv.DictReader(handle)}


def _key_and_label(record: bytes, names: list[str]) -> tuple[str, str]:
    feature = Example.FromString(record).features.feature
    label = names[feature["image/class/label"].int64_list.value[0]]
    return feature["image/source_id"].bytes_list.value[0].decode(), label


def test_the_sample_read_by_tfds_and_grain_as_the_manifest_says(tmp_path):
    """From the command line: TFDS's data sources (random index, features decoded) and
    Grain's global shuffle with a seed, batched, give every manifest row once, its label
    its own."""
    root = tmp_path / "sample"
    flags = ["--num_shards", "3", "--split", "train=0.75,validation=0.25", "--no_progress"]
    flags += AS_ARRAY_RECORD
    assert main(["convert", "--manifest", str(SAMPLE), "--output", str(root), *flags]) == 0
    version = published(root)
    info = DatasetInfo.from_json((version / INFO_FILE).read_text())
    names = (version / "labels.txt").read_text().split()
    expected = _manifest_rows(SAMPLE)
    assert sorted(path.name for path in version.glob("*-*-of-*")) == sorted(
        shard.file for split in info.splits.values() for shard in split.shards
    )
    assert all(path.endswith(".array_record") for path in map(str, version.glob("*-*-of-*")))

    builder = tfds.builder_from_directory(str(version))
    by_tfds, by_name, by_grain = {}, {}, {}
    for split, described in info.splits.items():
        source = builder.as_data_source(split=split)
        assert len(source) == described.examples
        for index in reversed(range(len(source))):  # random access, last first
            example = source[index]
            image, label = example["image/encoded"], example["image/class/label"]
            assert image.shape == (example["image/height"], example["image/width"], 3)
            by_tfds[example["image/source_id"].decode()] = names[label]
        named = tfds.data_source(NAME, split=split, data_dir=str(root))
        assert len(named) == described.examples
        by_name.update((named[i]["image/source_id"].decode(), split) for i in range(len(named)))

        paths = [str(version / shard.file) for shard in described.shards]
        shuffled = grain.MapDataset.source(grain.sources.ArrayRecordDataSource(paths))
        batches = list(shuffled.shuffle(seed=7).batch(4))
        assert sum(map(len, batches)) == described.examples
        pairs = [_key_and_label(record, names) for batch in batches for record in batch]
        assert len(dict(pairs)) == len(pairs)  # each record once
        order = [key for key, _ in pairs]
        again = [_key_and_label(r, names)[0] for b in shuffled.shuffle(seed=7).batch(4) for r in b]
        assert again == order and order != sorted(order)  # the seed's order, a shuffled one
        by_grain.update(pairs)
    assert by_tfds == by_grain == expected
    assert sorted(by_name) == sorted(expected)


@pytest.fixture
def array_record_root(tmp_path, dataset):
    flags = ["--num_shards", "2", "--split", "train=0.75,validation=0.25", "--no_progress"]
    run(["--manifest", str(dataset), "--output", str(tmp_path / "out"), *flags, *AS_ARRAY_RECORD])
    return tmp_path / "out"


def test_verify_preview_stats_and_load_read_it(array_record_root, tmp_path):
    root = array_record_root
    info = DatasetInfo.from_json((published(root) / INFO_FILE).read_text())
    assert info.file_format == "array_record" and verify(str(root), "all") == (20, [])
    for command in (
        ["preview", "-o", tmp_path / "sheet.png"],
        ["stats", "-o", tmp_path / "r.html"],
    ):
        assert main([command[0], str(root), *map(str, command[1:])]) == 0
    assert (tmp_path / "sheet.png").stat().st_size and "train" in (tmp_path / "r.html").read_text()
    for split, described in info.splits.items():
        loaded = load(str(root), split, batch_size=None, image_size=None, shuffle_buffer=0)
        labels = [int(label) for _, label in loaded]
        assert len(labels) == described.examples
        counts = {str(label): labels.count(label) for label in set(labels)}
        assert counts == described.label_counts
    batches = load(str(root), "train", batch_size=5, image_size=(32, 32), seed=1)
    assert [tuple(image.shape) for image, _ in batches] == [(5, 32, 32, 3)] * 3


def test_verify_finds_a_damaged_shard(array_record_root):
    version = published(array_record_root)
    shard = sorted(version.glob("train-*.array_record"))[0]
    data = bytearray(shard.read_bytes())
    data[200] ^= 1
    shard.write_bytes(bytes(data))
    records, problems = verify(str(array_record_root), "none")
    assert f"{shard.name}: size or CRC-32C differs from {INFO_FILE}" in problems
    assert any(problem.startswith(f"{shard.name}: record") for problem in problems[1:])


def test_a_refresh_carries_unchanged_shards_whole_and_writes_others_again(tmp_path):
    """A shard whose records all stay is copied as it is; one that loses a record, or that
    records join, is written again from its records: every file is still one ArrayRecord
    file, and TFDS and verify read the version."""
    rows = make_images(tmp_path, per_class=6)
    root = tmp_path / "out"
    flags = ["--output", str(root), "--num_shards", "3", "--no_progress", *AS_ARRAY_RECORD]
    first = run(["--manifest", str(write_manifest(tmp_path / "a.csv", rows)), *flags])
    grown = make_images(tmp_path / "more", per_class=1, seed=3)
    later = rows[1:] + [{**row, "image_uri": f"more/{row['image_uri']}"} for row in grown]
    second = run(
        ["--manifest", str(write_manifest(tmp_path / "b.csv", later)), *flags, "--incremental"]
    )
    old = {s.crc32c for s in first.info.splits["train"].shards}
    new = second.info.splits["train"].shards
    counts = second.info.refresh
    assert counts["carried"] + counts["rewritten"] == len(rows) - 1 and counts["dropped"] == 1
    assert counts["shards_carried"] and counts["shards_rewritten"]
    assert sum(s.records for s in new) == len(later) == second.info.records
    assert 0 < len([s for s in new if s.crc32c in old]) < len(new)  # some carried whole
    assert verify(str(root), "all") == (len(later), [])
    source = tfds.builder_from_directory(second.folder).as_data_source(split="train")
    assert sorted(source[i]["image/source_id"].decode() for i in range(len(source))) == sorted(
        row["image_uri"] for row in later
    )


def test_flags_that_do_not_fit_array_record_are_refused(dataset, tmp_path, capsys):
    argv = ["convert", "--manifest", str(dataset), "--output", str(tmp_path / "x")]
    for more in (["--compression", "gzip"], ["--write_index"]):
        assert main([*argv, *AS_ARRAY_RECORD, *more]) == 2
    assert main([*argv, "--file_format", "parquet"]) == 2
    err = capsys.readouterr().err
    assert "not ArrayRecord ones" in err and "holds its own index" in err


def test_bucket_to_bucket_through_the_workers_disk(tmp_path, gcs, convert, monkeypatch):
    """On gs:// each shard (and, on Beam, each piece, then the joined shard) is written on
    this machine's disk and uploaded: the bytes of a local run, and nothing left on the disk."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    rows = make_images(tmp_path, per_class=3)
    manifest = write_manifest(tmp_path / "manifest.csv", rows)
    flags = ("--num_shards", "2", "--target_shard_mb", "0.01", *AS_ARRAY_RECORD)
    local, _ = convert(manifest, *flags, output=tmp_path / "local")
    source = gcs(tmp_path, f"{tmp_path.name}-in")
    remote = f"gs://tfrp-test/{tmp_path.name}"
    _, info = convert(f"{source}/manifest.csv", *flags, output=remote)
    remote_version = resolve(remote).folder
    for split in info.splits.values():
        for shard in split.shards:
            stored = fileio.read_bytes(f"{remote_version}/{shard.file}")
            assert stored == (local / shard.file).read_bytes(), shard.file
            streamed = read_array_record_path(f"{remote_version}/{shard.file}")  # as load()
            assert list(streamed) == list(array_records_in(io.BytesIO(stored)))
    assert verify(remote, "all") == (12, [])
    tfds_info = json.loads(fileio.read_text(f"{remote_version}/dataset_info.json"))
    assert tfds_info["fileFormat"] == "array_record"
    # A refresh on the bucket: shards copied there, or written again from their records.
    (tmp_path / "next").mkdir()
    write_manifest(tmp_path / "next" / "fewer.csv", rows[1:])
    gcs(tmp_path / "next", f"{tmp_path.name}-in")  # beside the images
    _, refreshed = convert(f"{source}/fewer.csv", *flags, "--incremental", output=remote)
    counts = refreshed.refresh
    assert (counts["dropped"], counts["carried"] + counts["rewritten"]) == (1, 11)
    assert verify(remote, "all") == (11, [])
    assert not list(scratch.glob("array-record-*"))  # Beam keeps temporary files of its own
