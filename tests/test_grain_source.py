"""pipeline/read/grain_source.py: record i of a split read by its offset from the index files,
CRCs checked, as Grain reads it (its MapDataset and DataLoader, unmodified), locally and on
gs://; a damaged shard named in one line, a version without index files refused in one."""

import concurrent.futures
import csv
import gc
import io
import os
import pickle
import random
import shutil
import subprocess
import sys
from pathlib import Path

import grain
import pytest
from conftest import arguments, python_path, write_manifest

import tfrecord_pipeline
from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.versions import DatasetError, resolve
from tfrecord_pipeline.read.grain_source import Shard, grain_source, record_offsets
from tfrecord_pipeline.read.reader import open_dataset
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.tfrecord.proto.example_pb2 import Example
from tfrecord_pipeline.transforms.tfrecord.records import (
    RecordError,
    ShardFileWriter,
    read_records,
)

pytestmark = pytest.mark.slow  # the sample converted through the command, read back
SAMPLE = Path(__file__).resolve().parents[1] / "sample" / "manifest.csv"
CONVERT = "convert --manifest {m} --output {out} --no_progress --num_shards 3"
SPLITS = " --split train=0.75,validation=0.25"


def _key(record: bytes) -> str:
    """The record's row key, as protobuf's own parser reads it."""
    features = Example.FromString(record).features.feature
    return features["image/source_id"].bytes_list.value[0].decode()


def _in_file_order(folder: str, split: str) -> list[bytes]:
    """The split's records as the project's sequential reader walks its shards."""
    _, info = open_dataset(folder)
    shards = info.splits[split].shards
    return [
        record
        for shard in shards
        for _, record in read_records(fileio.read_bytes(fileio.join(folder, shard.file)))
    ]


def _converted(root: Path, *flags: str, manifest: Path = SAMPLE) -> Path:
    assert main([*arguments(CONVERT + SPLITS, m=manifest, out=root), *flags]) == 0
    return root


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    """The sample, converted with index files as a user converts it: the dataset root."""
    return _converted(tmp_path_factory.mktemp("grain") / "flowers", "--write_index")


def _index(sizes: list[int]) -> bytes:
    """The index the shard writer writes for records of `sizes` bytes."""
    writer = ShardFileWriter(io.BytesIO())
    for size in sizes:
        writer.write(b"x" * size)
    return writer.index_text().encode()


def test_offsets_are_read_from_the_index_and_checked_against_the_shard():
    shard = Shard("s", "i", records=3, bytes=(5 + 16) + (0 + 16) + (7 + 16))
    offsets = record_offsets(_index([5, 0, 7]), shard)
    assert list(offsets) == [0, 21, 37, 60] and offsets.itemsize == 4
    wrong = {
        b"0 21\n21 16\n": "2 records over 37 bytes, where the shard holds 3 over 60",
        b"0 21\n22 16\n21 23\n": "record 1 at byte 22, not 21",
        b"0 21\n21 8\n29 31\n": "record 1 of 8 bytes",
        b"0 21\n21 16\n37 x\n": "line 3 is not `offset size`",
        b"0 21\n21 16\n37 99999999999\n": "3 records over 61 bytes",
    }
    for index, message in wrong.items():
        with pytest.raises(RecordError, match=message):
            record_offsets(index, shard)
    huge = Shard("s", "i", records=1, bytes=1 << 32)
    assert record_offsets(b"0 4294967296\n", huge).itemsize == 8


def test_every_record_of_each_split_is_the_one_at_its_place_in_the_shards(indexed):
    folder = resolve(str(indexed)).folder
    _, info = open_dataset(str(indexed))
    rows = [row["image_uri"] for row in csv.DictReader(SAMPLE.open())]
    keys = []
    for split in ("train", "validation"):
        source = tfrecord_pipeline.grain_source(str(indexed), split)
        expected = _in_file_order(folder, split)
        assert len(source) == info.splits[split].examples == len(expected)
        shuffled = random.Random(0).sample(range(len(source)), len(source))
        assert [source[i] for i in shuffled] == [expected[i] for i in shuffled]
        assert source[-1] == expected[-1]
        keys += [_key(source[i]) for i in range(len(source))]
        with pytest.raises(IndexError):
            source[len(source)]
    assert sorted(keys) == sorted(rows)  # every manifest row once, in one split or the other
    source = grain_source(str(indexed), "validation")
    assert repr(source) == (
        f"IndexedTfrecordSource(folder={folder!r}, split='validation', "
        f"records={len(source)}, shards=3)"
    )


def test_an_array_record_version_is_read_as_its_tfrecord_twin_is(indexed, tmp_path):
    """The same conversion in ArrayRecord shards: the same records at the same places, read by
    array_record's data source (its files hold their own index), also in Grain's workers."""
    root = _converted(tmp_path / "array", "--file_format", "array_record")
    for split in ("train", "validation"):
        source, twin = grain_source(str(root), split), grain_source(str(indexed), split)
        assert len(source) == len(twin)
        assert [source[i] for i in range(len(source))] == [twin[i] for i in range(len(twin))]
    loaded = pickle.loads(pickle.dumps(source))
    assert [loaded[i] for i in range(len(loaded))] == [twin[i] for i in range(len(twin))]


def test_a_refreshed_version_s_carried_and_rewritten_shards_are_read_by_their_indexes(tmp_path):
    """A refresh after rows left the manifest writes the shards that held them again."""
    rows = list(csv.DictReader(SAMPLE.open()))
    for row in rows:
        row["image_uri"] = str(SAMPLE.parent / row["image_uri"])
    root = _converted(
        tmp_path / "nightly", "--write_index", manifest=write_manifest(tmp_path / "all.csv", rows)
    )
    fewer = write_manifest(tmp_path / "fewer.csv", rows[::2])
    _converted(root, "--write_index", "--incremental", manifest=fewer)
    folder = resolve(str(root)).folder
    _, info = open_dataset(folder)
    assert info.refresh["shards_rewritten"] and info.refresh["dropped"] == 20
    for split in ("train", "validation"):
        source = grain_source(str(root), split)
        assert [source[i] for i in range(len(source))] == _in_file_order(folder, split)


def test_a_grain_map_dataset_shuffles_and_batches_every_record_once(indexed):
    source = grain_source(str(indexed), "train")
    in_file_order = [
        _key(record) for record in _in_file_order(resolve(str(indexed)).folder, "train")
    ]

    def keys(seed: int) -> list[str]:
        dataset = grain.MapDataset.source(source).shuffle(seed=seed).map(_key).batch(4)
        return [key for batch in dataset for key in batch]

    assert sorted(keys(1)) == sorted(in_file_order) and len(keys(1)) == len(source)
    assert keys(1) == keys(1) != in_file_order  # shuffled, by the seed alone
    assert keys(1) != keys(2)


@pytest.fixture
def absl_flags_parsed():
    """Grain 0.2.18 beside JAX reads an Abseil flag when it starts worker processes, which
    raises in a program that never parsed its flags (google/grain#1355, fixed after 0.2.18):
    parsed here as `absl.app.run` parses them, and left as they were after the test."""
    from absl import flags

    parsed = flags.FLAGS.is_parsed()
    flags.FLAGS.mark_as_parsed()
    yield
    if not parsed:
        flags.FLAGS.unparse_flags()


def test_grain_s_data_loader_reads_every_record_once_in_its_worker_processes(
    indexed, absl_flags_parsed
):
    """Its workers get the source pickled: each loads the offsets and opens the shards itself."""
    source = grain_source(str(indexed), "train")
    sampler = grain.samplers.IndexSampler(
        len(source), shard_options=grain.sharding.NoSharding(), shuffle=True, num_epochs=1, seed=3
    )
    loader = grain.DataLoader(
        data_source=source, sampler=sampler, operations=[_KeyOf()], worker_count=2
    )
    keys = list(loader)
    assert sorted(keys) == sorted(_key(source[i]) for i in range(len(source)))


class _KeyOf(grain.transforms.Map):
    """A record's key, in the workers (a class of the module's: it pickles by its name)."""

    def map(self, record: bytes) -> str:
        return _key(record)


def test_a_source_needs_neither_grain_nor_tensorflow_to_read(indexed):
    """Python refuses to import a module whose sys.modules entry is None: neither is used."""
    script = (
        "import sys; sys.modules['grain'] = sys.modules['tensorflow'] = None; "
        "import tfrecord_pipeline; source = tfrecord_pipeline.grain_source(sys.argv[1]); "
        "print(len(source), source[0][:0])"
    )
    env = {**os.environ, "PYTHONPATH": python_path()}
    done = subprocess.run(
        [sys.executable, "-c", script, str(indexed)], env=env, capture_output=True, text=True
    )
    assert done.stdout == "28 b''\n", done.stderr


def test_the_pickled_source_carries_no_offsets_or_files_and_reads_alike(indexed):
    source = grain_source(str(indexed), "train")
    before = pickle.dumps(source)
    records = [source[i] for i in range(len(source))]
    assert pickle.dumps(source) == before  # what was loaded and opened stays in the process
    assert [pickle.loads(before)[i] for i in range(len(source))] == records


def test_reads_from_many_threads_at_once_each_give_their_record(indexed):
    source = grain_source(str(indexed), "train")
    expected = _in_file_order(resolve(str(indexed)).folder, "train")
    order = random.Random(1).choices(range(len(source)), k=400)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert list(pool.map(source.__getitem__, order)) == [expected[i] for i in order]


def test_a_collected_source_closes_the_shards_it_opened(indexed):
    gc.collect()
    opened = len(os.listdir("/proc/self/fd"))
    source = grain_source(str(indexed), "train")
    [source[i] for i in range(len(source))]
    assert len(os.listdir("/proc/self/fd")) == opened + 3
    del source
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == opened


def _damaged_copy(indexed: Path, tmp_path: Path) -> tuple[Path, Path, int]:
    """A copy of the dataset, the folder of its version, and the size of its first record."""
    root = tmp_path / "copy"
    shutil.copytree(indexed, root)
    folder = Path(resolve(str(root)).folder)
    _, info = open_dataset(str(root))
    first = int((folder / info.splits["train"].shards[0].index).read_text().split()[1])
    return root, folder / info.splits["train"].shards[0].file, first


def test_a_damaged_record_is_an_error_naming_its_shard_and_the_others_still_read(indexed, tmp_path):
    root, shard, first = _damaged_copy(indexed, tmp_path)
    data = bytearray(shard.read_bytes())
    data[first - 10] ^= 0xFF  # in the first record's data
    shard.write_bytes(bytes(data))
    source = grain_source(str(root), "train")
    with pytest.raises(DatasetError) as raised:
        source[0]
    assert str(raised.value) == (
        f"{shard} record 0 cannot be read (data CRC mismatch); run verify on {shard.parent}"
    )
    assert _key(source[1])


def test_a_cut_shard_or_an_index_not_its_own_is_an_error_naming_the_shard(indexed, tmp_path):
    root, shard, first = _damaged_copy(indexed, tmp_path)
    shard.write_bytes(shard.read_bytes()[: first - 3])
    with pytest.raises(DatasetError, match=f"^{shard} record 0 cannot be read .*truncated data"):
        grain_source(str(root), "train")[0]
    index = shard.parent / "index" / f"{shard.name}.idx"
    lines = index.read_text().splitlines(keepends=True)
    index.write_text("".join(lines[:-1]))  # an index of a shard of a record less
    with pytest.raises(DatasetError, match=f"its index {index} does not fit it: .* records over"):
        grain_source(str(root), "train")[0]
    index.write_text("".join(lines))
    shard.unlink()
    with pytest.raises(DatasetError, match=f"^{shard} record 0 cannot be read \\(No such file"):
        grain_source(str(root), "train")[0]


def test_a_version_without_index_files_or_the_split_is_refused_in_one_line(indexed, tmp_path):
    root = _converted(tmp_path / "plain")
    folder = resolve(str(root)).folder
    with pytest.raises(DatasetError) as raised:
        grain_source(str(root), "train")
    assert str(raised.value) == (
        f"{folder} has no index files: records are read by their offsets in them; convert "
        "with --write_index (uncompressed shards)"
    )
    with pytest.raises(DatasetError, match=r"^no split 'test' in .*; it has \['train', 'valid"):
        grain_source(str(indexed), "test")
    with pytest.raises(DatasetError, match="holds no published dataset"):
        grain_source(str(tmp_path), "train")


def test_a_gs_version_is_read_one_ranged_request_a_record(indexed, tmp_path, gcs, faulty_gcs):
    """Converted into the bucket as a user converts it; read through a proxy that counts the
    requests and fails about half of them (retried, as every read of an object)."""
    remote = f"gs://tfrp-test/{tmp_path.name}"
    _converted(remote, "--write_index")
    folder = resolve(remote).folder
    expected = _in_file_order(resolve(str(indexed)).folder, "train")  # the same bytes
    proxy = faulty_gcs(f"{tmp_path.name}/", rate=0.5, seed=4)
    source = grain_source(remote, "train")
    proxy.requests.clear()
    order = random.Random(2).sample(range(len(source)), len(source))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert list(pool.map(source.__getitem__, order)) == [expected[i] for i in order]
    _, info = open_dataset(folder)
    name = folder.removeprefix("gs://tfrp-test/")
    shards = info.splits["train"].shards
    for shard in shards:  # an index is read once, a record in one request, each as it fails
        file, index = f"{name}/{shard.file}", f"{name}/{shard.index}"
        assert proxy.requests["GET", file] == shard.records + proxy.failed[file]
        assert proxy.requests["GET", index] == 1 + proxy.failed[index]
    assert proxy.faults
