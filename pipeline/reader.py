"""Examples of a converted dataset as Python values, without TensorFlow (preview, stats)."""

from collections.abc import Iterator

from pipeline.commit import read_info
from pipeline.metadata import DatasetInfo
from transforms import fileio
from transforms.errors import UserError
from transforms.proto.example_pb2 import Example
from transforms.records import read_records, shard_payload


def open_dataset(output: str) -> DatasetInfo:
    try:
        return read_info(output)
    except (*fileio.READ_ERRORS, ValueError, KeyError) as error:
        raise UserError(f"{output}: not a converted dataset ({error})") from None


def examples(output: str, info: DatasetInfo, split: str) -> Iterator[dict]:
    """Every record of `split` as {feature key: first value}, in shard order."""
    if split not in info.splits:
        raise UserError(f"no split {split!r} in {output}; it has {sorted(info.splits)}")
    for shard in info.splits[split].shards:
        data = fileio.read_bytes(fileio.join(output, shard.file))
        for _, record in read_records(shard_payload(data, info.compression)):
            features = Example.FromString(record).features.feature
            yield {
                key: getattr(feature, feature.WhichOneof("kind")).value[0]
                for key, feature in features.items()
                if feature.WhichOneof("kind")
            }
