"""`tfrecord-pipeline verify OUTPUT`: is a converted dataset exactly what its metadata says?

Resolves the published version once (pointer, marker and the metadata's hash must agree), then
checks every listed shard's size and CRC-32C, the framing and both CRCs of every record, record
counts, DALI index files, `labels.txt` and TFDS's files (against what our metadata makes of
them: pipeline/dataset/version_files.py, the check a rollback makes too), that every
Example carries the recorded features with their types, and that images decode to the stored
height, width and channels (the first `SAMPLE_PER_SHARD` records of each shard, all with
`decode="all"`, none with `"none"`), a JPEG only after the converter's own checks, as the
current converter makes them, with the limits the dataset was converted with: its structure,
pixels, scans and markers, and a strict libjpeg decode that refuses a scan whose data ends
before its frame is filled (which an older version may hold: versions converted before that
check stored such files); and that every listed errors file holds its count of rows. Uses the
project's own proto classes, Pillow and libjpeg-turbo: no TensorFlow.
"""

import io

from google.protobuf.message import DecodeError
from PIL import Image

from tfrecord_pipeline.dataset.metadata import INFO_FILE, DatasetInfo
from tfrecord_pipeline.dataset.version_files import check_file, version_file_problems
from tfrecord_pipeline.dataset.versions import DatasetError, resolve
from tfrecord_pipeline.transforms.errors import RowError
from tfrecord_pipeline.transforms.image.config import DECODER_ERRORS, ImageConfig
from tfrecord_pipeline.transforms.image.images import check_jpeg, check_scans, sniff
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.storage.file_checks import Checksummed
from tfrecord_pipeline.transforms.tfrecord.examples import RAW_KEY
from tfrecord_pipeline.transforms.tfrecord.proto.example_pb2 import Example
from tfrecord_pipeline.transforms.tfrecord.records import READ_BYTES, RecordError
from tfrecord_pipeline.transforms.write.published import ShardInfo

DECODE_MODES = ("sample", "all", "none")
SAMPLE_PER_SHARD = 8
_KINDS = {"int64": "int64_list", "float32": "float_list", "string": "bytes_list"}
_CHANNELS = {"L": 1, "RGB": 3}


def _check_example(
    record: bytes, features: dict[str, str], lists: frozenset = frozenset()
) -> tuple[str | None, dict]:
    """(problem or None, {feature key: value}) for one serialized Example: every feature of
    its dtype, one value each, or any number for the keys in `lists`."""
    try:
        feature_map = Example.FromString(record).features.feature
    except DecodeError as error:
        return f"not a parsable Example ({error})", {}
    values = {}
    for key, dtype in features.items():
        if key not in feature_map:
            return f"feature {key} is missing", {}
        kind = feature_map[key].WhichOneof("kind")
        value = getattr(feature_map[key], kind).value if kind else []
        if key in lists:
            if kind != _KINDS[dtype]:
                return f"feature {key} is not a list of {dtype}", {}
            values[key] = list(value)
            continue
        if kind != _KINDS[dtype] or len(value) != 1:
            return f"feature {key} is not one {dtype}", {}
        values[key] = value[0]
    return None, values


def _limits(options: dict) -> ImageConfig:
    """The JPEG limits the dataset was converted with (the defaults where it predates one)."""
    default = ImageConfig()
    return ImageConfig(
        max_pixels=options.get("max_pixels", default.max_pixels),
        max_scans=options.get("max_scans", default.max_scans),
        max_decode_bytes=int(
            options.get("max_decode_mb", default.max_decode_bytes / 2**20) * 2**20
        ),
        max_pixels_per_byte=options.get("max_pixels_per_byte", default.max_pixels_per_byte),
        max_metadata_bytes=int(
            options.get("max_metadata_mb", default.max_metadata_bytes / 2**20) * 2**20
        ),
    )


def _check_pixels(values: dict, limits: ImageConfig) -> str | None:
    height, width = values["image/height"], values["image/width"]
    channels = values["image/channels"]
    if RAW_KEY in values:
        size = len(values[RAW_KEY])
        return None if size == height * width * channels else f"raw size {size} != shape"
    encoded = values["image/encoded"]
    try:
        if sniff(encoded) == "jpeg":
            check_scans(encoded, check_jpeg(encoded, limits), limits)
        image = Image.open(io.BytesIO(encoded))
        if (image.height, image.width, _CHANNELS.get(image.mode)) != (height, width, channels):
            return f"image is {image.width}x{image.height} {image.mode}, record says otherwise"
        image.load()
    except RowError as error:
        return f"image is rejected: {error.reason.value}: {error.message}"
    except (*DECODER_ERRORS, Image.DecompressionBombError) as error:
        return f"image does not decode ({error})"
    return None


def verify_shard(output: str, info: DatasetInfo, shard: ShardInfo, decode: str) -> list[str]:
    """Problems with one shard file, each prefixed with its name. The file is read once, as a
    stream: memory holds read buffers and a record (a batch of an ArrayRecord file), never the
    shard, whose size and CRC-32C are counted as its records pass."""
    try:
        with fileio.open_bytes(fileio.join(output, shard.file), READ_BYTES) as raw:
            stream = Checksummed(io.BufferedReader(raw, READ_BYTES))
            problems = _check_records(output, stream, info, shard, decode)
            stream.drain(
                READ_BYTES
            )  # what follows damage that stops the records: the size still counts
    except fileio.READ_ERRORS as error:
        return [f"{shard.file}: cannot be read ({error})"]
    if (stream.bytes, stream.crc32c) != (shard.bytes, shard.crc32c):
        problems.insert(0, f"{shard.file}: size or CRC-32C differs from {INFO_FILE}")
    return problems


def _check_records(
    output: str, stream: Checksummed, info: DatasetInfo, shard: ShardInfo, decode: str
) -> list[str]:
    """Problems with the records of a shard file read from `stream` (the first RecordError
    ends them), and with its index file."""
    problems, limits = [], _limits(info.options)
    count, spans, lists = 0, [], frozenset(info.list_features)
    try:
        records = info.shard_format().records_in(stream)
        for count, (offset, record) in enumerate(records, start=1):
            spans.append(f"{offset} {len(record) + 16}\n")
            problem, values = _check_example(record, info.features, lists)
            wanted = decode == "all" or (decode == "sample" and count <= SAMPLE_PER_SHARD)
            if problem is None and wanted:
                problem = _check_pixels(values, limits)
            if problem:
                problems.append(f"{shard.file}: record {count - 1}: {problem}")
    except RecordError as error:
        return [*problems, f"{shard.file}: {error}"]
    if count != shard.records:
        problems.append(f"{shard.file}: {count} records, {INFO_FILE} says {shard.records}")
    if shard.index:
        expected = "".join(spans).encode()
        problems += check_file(
            output, shard.index, expected, "offsets differ from the shard's records"
        )
    return problems


def verify(path: str, decode: str = "sample") -> tuple[int, list[str]]:
    """(records checked, problems) of the published version of the dataset root `path`, or of
    the version folder `path`, local or gs://; no problems means it is sound. A root that holds
    no complete version is a problem, not an exception. `decode` is how many images of each
    shard are decoded: "sample" (the first few), "all" or "none"."""
    if decode not in DECODE_MODES:
        raise ValueError(f"decode is one of {', '.join(DECODE_MODES)}, not {decode!r}")
    try:
        published = resolve(path)
        info = DatasetInfo.from_json(published.info_text)
    except DatasetError as error:
        return 0, [str(error)]
    except (ValueError, KeyError, TypeError) as error:
        return 0, [f"{INFO_FILE} cannot be read ({error})"]
    # TFDS's files are made from our metadata; TFDS trusts their shard lengths, so check them.
    records, problems = 0, version_file_problems(published.folder, info)
    for split in info.splits.values():
        for shard in split.shards:
            problems += verify_shard(published.folder, info, shard, decode)
            records += shard.records
    return records, problems
