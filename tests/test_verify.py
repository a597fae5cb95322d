"""`verify`: a sound dataset passes; every kind of damage is caught and named."""

import dataclasses
import gzip
import json
from pathlib import Path

import pytest
from conftest import arguments, published, traced_peak

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.commit import read_info
from tfrecord_pipeline.dataset.metadata import INFO_FILE
from tfrecord_pipeline.dataset.versions import MARKER, marker_bytes
from tfrecord_pipeline.read.verify import verify, verify_shard
from tfrecord_pipeline.transforms.tfrecord.records import crc32c_of, read_records

pytestmark = pytest.mark.slow
SAMPLE = Path(__file__).resolve().parents[1] / "sample" / "manifest.csv"


@pytest.fixture(scope="module", params=["none", "gzip"])
def converted(request, tmp_path_factory):
    from tfrecord_pipeline.runners.convert import run

    output = tmp_path_factory.mktemp(f"verify-{request.param}") / "out"
    flags = ["--num_shards", "2", "--compression", request.param, "--direct_num_workers=1"]
    run(["--manifest", str(SAMPLE), "--output", str(output), "--no_progress", *flags])
    return output  # the dataset root


def _copy(source: Path, target: Path) -> Path:
    target.mkdir()
    for path in source.rglob("*"):
        if path.is_file():
            (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            (target / path.relative_to(source)).write_bytes(path.read_bytes())
    return target


def test_a_sound_dataset_verifies_with_every_image_decoded(converted, capsys):
    assert verify(str(converted), "all") == (40, [])
    assert verify(str(published(converted)), "all") == (40, [])  # the version folder too
    assert main(["verify", str(converted), "--decode", "all"]) == 0
    assert "ok, 40 records" in capsys.readouterr().out


def test_every_flipped_byte_is_caught_even_by_the_crcs_alone(converted):
    converted = published(converted)
    info = read_info(str(converted))
    shard = info.splits["train"].shards[0]
    original = (converted / shard.file).read_bytes()
    for position in range(0, len(original), max(1, len(original) // 40)):
        damaged = bytearray(original)
        damaged[position] ^= 0x01
        (converted / shard.file).write_bytes(bytes(damaged))
        assert verify_shard(str(converted), info, shard, "none"), position
        # Same damage, with metadata claiming the damaged bytes: framing and CRCs still catch it,
        # and the bytes after the damage are read too, so the file's own CRC-32C is no problem.
        claimed = dataclasses.replace(shard, crc32c=crc32c_of(bytes(damaged)))
        problems = verify_shard(str(converted), info, claimed, "none")
        assert problems and not any("CRC-32C differs" in p for p in problems), position
    (converted / shard.file).write_bytes(original)


_VERIFY_SETUP = """
import dataclasses
from tfrecord_pipeline.dataset.commit import read_info
from tfrecord_pipeline.read.verify import verify_shard
folder, size, crc32c, records = sys.argv[1:]
info = read_info(folder)
sound, big = info.splits["train"].shards
assert verify_shard(folder, info, sound, "sample") == []  # every module a check uses imported
big = dataclasses.replace(big, records=int(records), bytes=int(size), crc32c=crc32c)
"""
_VERIFY = 'print(len(verify_shard(folder, info, big, "sample")))'


def test_a_shard_is_verified_in_memory_of_its_buffers_never_the_file(converted, tmp_path):
    """A shard of ~25 MB (a shard's records again and again) is sound, and verify held a few
    MB of it at most: the file is read as a stream, its size and CRC-32C counted on the way."""
    output = published(_copy(converted, tmp_path / "copy"))
    info = read_info(str(output))
    shard = info.splits["train"].shards[1]
    data = (output / shard.file).read_bytes()
    payload = gzip.decompress(data) if info.compression == "gzip" else data
    records = [record for _, record in read_records(payload)]
    writer = info.shard_format().writer(str(output / shard.file))
    for record in records * (25 * 2**20 // len(payload) + 1):
        writer.write(record)
    writer.close()
    facts = (writer.bytes, writer.crc32c, writer.records)
    printed, peak = traced_peak(_VERIFY_SETUP, _VERIFY, str(output), *map(str, facts))
    assert printed == ["0"]  # no problem: every record read and checked, the file's CRC-32C too
    assert peak < 8 << 20 < writer.bytes // 2, (peak, writer.bytes)  # buffers of 1 MB, a record


def test_an_empty_gzip_member_before_more_records_is_where_tensorflow_may_stop(tmp_path):
    """A gzip shard may hold several members; TensorFlow's reader can end at one that holds
    nothing (it does here, with the first of four records before it; where the member falls in
    its buffers decides), so verify says so, even of bytes the metadata claims."""
    import tensorflow as tf

    from tfrecord_pipeline.runners.convert import run

    root = tmp_path / "out"
    flags = ["--num_shards", "1", "--compression", "gzip", "--no_progress"]
    run(["--manifest", str(SAMPLE), "--output", str(root), *flags])
    output = published(root)
    info = read_info(str(output))
    (shard,) = info.splits["train"].shards
    path = output / shard.file
    payload = gzip.decompress(path.read_bytes())
    ends = [offset + len(record) + 16 for offset, record in read_records(payload)]

    def claimed(*members: bytes):
        """The shard as these gzip members, four records in all, as its metadata claims."""
        path.write_bytes(b"".join(gzip.compress(member, mtime=0) for member in members))
        data = path.read_bytes()
        return dataclasses.replace(shard, records=4, bytes=len(data), crc32c=crc32c_of(data))

    first, rest = payload[: ends[0]], payload[ends[0] : ends[3]]
    assert verify_shard(str(output), info, claimed(first, rest), "none") == []
    empty_between = claimed(first, b"", rest)
    read = tf.data.TFRecordDataset(str(path), compression_type="GZIP")
    assert int(read.reduce(0, lambda count, _: count + 1)) == 1
    (problem,) = verify_shard(str(output), info, empty_between, "none")
    assert f"an empty gzip member at byte {len(gzip.compress(first, mtime=0)):,}: " in problem
    assert "TensorFlow's reader may stop there" in problem


@pytest.mark.parametrize("damage", ["marker", "shard", "truncate", "info", "pointer"])
def test_missing_and_changed_files_are_reported(converted, tmp_path, damage, capsys):
    root = _copy(converted, tmp_path / "copy")
    output = published(root)
    shard = output / read_info(str(output)).splits["train"].shards[1].file
    if damage == "marker":
        (output / MARKER).unlink()
    elif damage == "pointer":  # metadata and marker agree, but not what LATEST promised
        info = json.loads((output / INFO_FILE).read_text())
        info["records"] += 1
        (output / INFO_FILE).write_text(json.dumps(info))
        (output / MARKER).write_bytes(marker_bytes((output / INFO_FILE).read_bytes()))
    elif damage == "shard":
        shard.unlink()
    elif damage == "truncate":
        shard.write_bytes(shard.read_bytes()[:-7])
    else:
        info = json.loads((output / INFO_FILE).read_text())
        info["records"] += 1
        (output / INFO_FILE).write_text(json.dumps(info))
    assert main(["verify", str(root)]) == 1
    assert capsys.readouterr().err.strip()


def test_dali_index_files_are_written_checked_and_refused_with_gzip(tmp_path, capsys):
    from tfrecord_pipeline.runners.convert import run

    root = tmp_path / "indexed"
    argv = arguments(
        "--manifest {m} --output {root} --num_shards 2 --write_index --no_progress"
        " --direct_num_workers=1",
        m=SAMPLE,
        root=root,
    )
    run(argv)
    output = published(root)
    info = read_info(str(output))
    # A reader's glob of a split's shards (`train-*`) finds the shards and nothing else.
    assert sorted(p.name for p in output.glob("train-*")) == sorted(
        shard.file for shard in info.splits["train"].shards
    )
    for shard in info.splits["train"].shards:
        data = (output / shard.file).read_bytes()
        spans = [line.split() for line in (output / shard.index).read_text().splitlines()]
        assert len(spans) == shard.records
        for offset, size in ((int(a), int(b)) for a, b in spans):  # DALI reads exactly these
            length = int.from_bytes(data[offset : offset + 8], "little")
            assert size == length + 16
        assert sum(int(size) for _, size in spans) == len(data)
    assert verify(str(root)) == (40, [])
    index = output / info.splits["train"].shards[0].index
    index.write_text(index.read_text().replace("0 ", "1 ", 1))
    assert any(".idx" in problem for problem in verify(str(root))[1])
    gzip_flags = ["--write_index", "--compression", "gzip"]
    argv = arguments("convert --manifest {m} --output {out}", m=SAMPLE, out=tmp_path / "g")
    assert main([*argv, *gzip_flags]) == 2
    assert "--write_index" in capsys.readouterr().err
