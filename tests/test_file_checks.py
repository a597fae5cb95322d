"""Whether a version's files are those its metadata describes: size, CRC-32C, DALI index."""

from tfrecord_pipeline.transforms.storage.file_checks import check_shards
from tfrecord_pipeline.transforms.tfrecord.records import ShardFileWriter
from tfrecord_pipeline.transforms.write.published import ShardInfo


def test_a_shard_is_sound_only_with_its_metadata_s_size_and_crc_and_an_index_that_fits_it(tmp_path):
    writer = ShardFileWriter(open(tmp_path / "s.tfrecord", "wb"))  # noqa: SIM115 - closes it
    for record in (b"one", b"two"):
        writer.write(record)
    writer.close()
    (tmp_path / "s.idx").write_text(writer.index_text())
    (tmp_path / "bad.idx").write_text("0 19\n19 20\n")
    data = (tmp_path / "s.tfrecord").read_bytes()
    (tmp_path / "cut.tfrecord").write_bytes(data[:-1])
    (tmp_path / "flipped.tfrecord").write_bytes(data[:5] + bytes([data[5] ^ 1]) + data[6:])
    shards = [
        ShardInfo("s.tfrecord", 2, writer.bytes, writer.crc32c, "s.idx"),
        ShardInfo("s.tfrecord", 2, writer.bytes, writer.crc32c, "bad.idx"),
        ShardInfo("s.tfrecord", 2, writer.bytes, writer.crc32c, "missing.idx"),
        ShardInfo("cut.tfrecord", 2, writer.bytes, writer.crc32c),
        ShardInfo("flipped.tfrecord", 2, writer.bytes, writer.crc32c),
        ShardInfo("missing.tfrecord", 2, writer.bytes, writer.crc32c),
    ]
    assert list(check_shards(str(tmp_path), shards)) == [True, False, False, False, False, False]
