"""The conversion's own flags, as one dataclass, and the values each flag stands for (a
`ReadConfig`, an `ImageConfig`, shard counts, a label map); every other flag goes to Beam
untouched. The command line's parser is pipeline/config/arguments.py; the one check of every
value, and the configs the stages take, are pipeline/config/conversion.py's."""

import dataclasses
import os

from tfrecord_pipeline.config.presets import PRESETS
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.manifest.labels import MAX_LABELS, LabelMap, parse_label_map
from tfrecord_pipeline.transforms.manifest.rows import FEATURE_TYPES, ReadConfig
from tfrecord_pipeline.transforms.manifest.splits import parse_split_spec
from tfrecord_pipeline.transforms.plan.sharding import (
    DEFAULT_TARGET_SHARD_MB,
    ShardCounts,
    parse_shard_counts,
)
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.tfrecord.examples import IMAGE_FEATURES, RAW_KEY
from tfrecord_pipeline.transforms.tfrecord.records import MAX_RECORD_BYTES
from tfrecord_pipeline.transforms.write.formats import ShardFormat
from tfrecord_pipeline.transforms.write.shard_writer import (
    DEFAULT_MAX_FILE_MB,
    DEFAULT_READ_LATENCY_MS,
)

# Flags that change how this machine runs the job, not the dataset: kept out of its metadata.
_LOCAL_ONLY = (
    "image_root",  # a path, as the manifests' are: moving the images changes no record
    "keep_versions",
    "incremental",
    "progress",
    "manifest",
    "output",
    "threads",
    "read_latency_ms",
    "processes",
    "wait",
    "debug",
)


_IMAGE = ImageConfig()  # the image defaults live in one place: the workers' config


@dataclasses.dataclass
class ConvertOptions:
    """The job's own flags. Their defaults are the ones below: the parser adds none."""

    manifest: list[str]  # or one path; a str or os.PathLike each, as output and the others
    output: str
    image_root: str | None = None
    num_shards: int | str | None = None  # 8, "8" or "train=8,validation=2"
    target_shard_mb: float = DEFAULT_TARGET_SHARD_MB
    split: str | None = None
    label_map: str | None = None
    label_offset: int | None = None  # None: the preset's, else 0
    max_labels: int | None = None  # None: MAX_LABELS, and labels that are nearly one a row refused
    preset: str | None = None
    multi_label: bool = False
    label_separator: str = "|"
    feature: list[str] = dataclasses.field(default_factory=list)
    drop_negatives: bool = False
    masks: bool = False
    validate: str = _IMAGE.validate
    channels: int = _IMAGE.channels
    jpeg_quality: int = _IMAGE.jpeg_quality
    max_pixels: int = _IMAGE.max_pixels
    max_decode_mb: float = _IMAGE.max_decode_bytes / 2**20
    max_scans: int = _IMAGE.max_scans
    max_pixels_per_byte: int = _IMAGE.max_pixels_per_byte
    max_metadata_mb: float = _IMAGE.max_metadata_bytes / 2**20
    max_side: int | None = _IMAGE.max_side
    resize_short_side: int | None = _IMAGE.resize_short_side
    resample: str = _IMAGE.resample
    exif_transpose: bool = _IMAGE.exif_transpose
    background: str = "white"
    image_encoding: str = _IMAGE.encoding
    max_record_mb: float = MAX_RECORD_BYTES / 2**20
    max_file_mb: float = DEFAULT_MAX_FILE_MB
    dedup: bool = False
    incremental: bool = False
    freeze_labels: bool = False
    write_index: bool = False
    compression: str = "none"
    file_format: str = "tfrecord"
    max_error_rate: float = 0.01
    run_key: str | None = None  # recorded: a retry that finds it published publishes nothing
    threads: int = 0
    read_latency_ms: float = DEFAULT_READ_LATENCY_MS
    processes: int = 0
    wait: bool = False
    keep_versions: int = 0
    progress: bool = True
    debug: bool = False

    def __post_init__(self):
        # As Python callers write paths: one manifest alone, pathlib paths. Strings from here.
        one = isinstance(self.manifest, str | os.PathLike)
        self.manifest = [os.fspath(path) for path in ([self.manifest] if one else self.manifest)]
        self.output = os.fspath(self.output)
        for name in ("image_root", "label_map"):
            if getattr(self, name) is not None:
                setattr(self, name, os.fspath(getattr(self, name)))
        preset = PRESETS.get(self.preset or "")
        if self.label_offset is None:
            self.label_offset = preset.label_offset if preset else 0
        if self.num_shards is None and preset:
            self.num_shards = preset.num_shards
        if isinstance(self.num_shards, int):  # recorded as the command line gives it
            self.num_shards = str(self.num_shards)

    def read_config(self) -> ReadConfig:
        """How rows are read; whether they list objects is the manifests' to say
        (transforms/manifest/sources.py `detection_config`)."""
        split_spec = parse_split_spec(self.split) if self.split else None
        separator = self.label_separator if self.multi_label else None
        image_root = fileio.join(self.image_root, "") if self.image_root else ""
        return ReadConfig(
            split_spec,
            self.features(),
            separator,
            image_root=image_root,
            drop_negatives=self.drop_negatives,
            masks=self.masks,
        )

    def image_config(self) -> ImageConfig:
        return ImageConfig(
            validate=self.validate,
            channels=self.channels,
            jpeg_quality=self.jpeg_quality,
            max_pixels=self.max_pixels,
            max_scans=self.max_scans,
            max_decode_bytes=int(self.max_decode_mb * 2**20),
            max_pixels_per_byte=self.max_pixels_per_byte,
            max_metadata_bytes=int(self.max_metadata_mb * 2**20),
            max_side=self.max_side,
            resize_short_side=self.resize_short_side,
            resample=self.resample,
            exif_transpose=self.exif_transpose,
            background=parse_colour(self.background),
            encoding=self.image_encoding,
        )

    def shard_format(self) -> ShardFormat:
        return ShardFormat(self.file_format, self.compression)

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 2**20)

    def shard_counts(self) -> ShardCounts:
        return parse_shard_counts(self.num_shards)

    def pinned_labels(self) -> LabelMap | None:
        """`--label_map`'s ids: the file is read here, once a run (`prepare`)."""
        if not self.label_map:
            return None
        try:
            text = fileio.read_text(self.label_map)
            return parse_label_map(text, self.label_offset, self.max_labels or MAX_LABELS)
        except OSError as error:
            raise UserError(f"--label_map: cannot read {self.label_map} ({error})") from None

    def features(self) -> tuple[tuple[str, str], ...]:
        """`--feature name:type` pairs, checked against the types and the reserved keys."""
        pairs = []
        for text in self.feature:
            name, _, kind = text.rpartition(":")
            if not name or kind not in FEATURE_TYPES:
                raise UserError(f"--feature: expected name:{'|'.join(FEATURE_TYPES)}, got {text!r}")
            if name in (*dict(IMAGE_FEATURES), RAW_KEY, "image_uri", "label", "split", "key"):
                raise UserError(f"--feature: {name!r} is reserved")
            if name in dict(pairs):
                raise UserError(f"--feature: {name!r} is given twice")
            pairs.append((name, kind))
        return tuple(pairs)

    def recorded(self) -> dict:
        """The options that shape the output, as stored in the version's metadata."""
        fields = dataclasses.asdict(self)
        for local_only in _LOCAL_ONLY:
            fields.pop(local_only)
        fields["features"] = [list(pair) for pair in self.features()]
        return fields


_COLOURS = {"white": (255, 255, 255), "black": (0, 0, 0)}


def parse_colour(text: str) -> tuple[int, int, int]:
    """`white`, `black` or `R,G,B` with 0-255 components."""
    if text in _COLOURS:
        return _COLOURS[text]
    try:
        colour = tuple(int(part) for part in text.split(","))
    except ValueError:
        colour = ()
    if len(colour) != 3 or not all(0 <= c <= 255 for c in colour):
        raise UserError(f"--background: expected white, black or R,G,B, got {text!r}")
    return colour


def option_defaults() -> dict[str, object]:
    """Every ConvertOptions field's default, by name."""
    return dataclasses.asdict(ConvertOptions(manifest=[], output=""))
