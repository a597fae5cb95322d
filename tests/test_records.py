"""transforms/tfrecord/records.py: TFRecord framing with its masked CRC, and gzip shards that are
the same bytes every time."""

import gzip
import io

from tfrecord_pipeline.transforms.tfrecord.records import ShardFileWriter, frame, masked_crc32c


def test_masked_crc_and_framing_match_the_tfrecord_format():
    # Known answer: TensorFlow's masked CRC of the 8-byte length 0 (an empty record).
    assert masked_crc32c(b"\x00" * 8) == 0x07980329
    record = frame(b"hello")
    assert record[:8] == (5).to_bytes(8, "little") and record[12:17] == b"hello"
    assert len(record) == 8 + 4 + 5 + 4


class _Keep(io.BytesIO):
    def close(self):
        self.closed_value = self.getvalue()


def test_gzip_shards_are_deterministic_and_fingerprinted():
    outputs = []
    for _ in range(2):
        sink = _Keep()
        writer = ShardFileWriter(sink, compress=True)
        writer.write(b"a" * 1000)
        writer.close()
        outputs.append((sink.closed_value, writer.crc32c, writer.bytes))
    assert outputs[0] == outputs[1]
    data = outputs[0][0]
    assert gzip.decompress(data) == frame(b"a" * 1000) and outputs[0][2] == len(data)
