"""The conversion's own options, as one dataclass made from their declarations
(pipeline/config/flags.py), and the values each stands for (a `ReadConfig`, an `ImageConfig`,
shard counts, a label map); every other flag goes to Beam untouched. The command line's parser
is pipeline/config/arguments.py; the one check of every value, and the configs the stages take,
are pipeline/config/conversion.py's."""

import dataclasses
import os

from tfrecord_pipeline.config.flags import FLAGS
from tfrecord_pipeline.config.option import DATASET, Option
from tfrecord_pipeline.config.presets import PRESETS
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.manifest.ground_truth import read_ground_truth
from tfrecord_pipeline.transforms.manifest.labels import MAX_LABELS, LabelMap, parse_label_map
from tfrecord_pipeline.transforms.manifest.rows import FEATURE_TYPES, ReadConfig
from tfrecord_pipeline.transforms.manifest.splits import parse_split_spec
from tfrecord_pipeline.transforms.plan.sharding import ShardCounts, parse_shard_counts
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.tfrecord.examples import IMAGE_FEATURES, RAW_KEY
from tfrecord_pipeline.transforms.write.formats import ShardFormat


class _Options:
    """What `ConvertOptions` does with its fields; the fields themselves, with their defaults,
    are made from the options' declarations (pipeline/config/flags.py), below."""

    def __post_init__(self):
        # As Python callers write paths: one manifest alone, pathlib paths. Strings from here.
        one = isinstance(self.manifest, str | os.PathLike)
        self.manifest = [os.fspath(path) for path in ([self.manifest] if one else self.manifest)]
        self.output = os.fspath(self.output)
        for name in ("image_root", "label_map", "ground_truth"):
            if getattr(self, name) is not None:
                setattr(self, name, os.fspath(getattr(self, name)))
        for name, value in normalised(vars(self)).items():
            setattr(self, name, value)
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
            max_file_bytes=self.max_file_bytes,
            ground_truth=self.checked_ground_truth(),
            label_field=self.label_field,
        )

    def checked_ground_truth(self) -> str:
        """`--ground_truth`'s absolute path, the file checked here (read_ground_truth) and read
        again where a flat archive is read: its lines are not carried to the workers."""
        if not self.ground_truth:
            return ""
        read_ground_truth(self.ground_truth, names_only=self.preset == "tpu-imagenet")
        return fileio.absolute(self.ground_truth)

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
        """The shards' format; a preset's extensionless names are for its readers' TFRecords."""
        preset = PRESETS.get(self.preset or "")
        extension = not preset or preset.extension or self.file_format != "tfrecord"
        return ShardFormat(self.file_format, self.compression, extension)

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
        fields = {
            option.dest: getattr(self, option.dest) for option in FLAGS if option.scope == DATASET
        }
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


def normalised(options: dict) -> dict:
    """`options` (fields, or the ones a version recorded) with any older spelling of a value
    given as the value it stands for (`--validate structural`: `scans`), so that a version
    recorded with the old spelling is the same as one recorded with the new."""
    kinds = {option.dest: option.kind for option in FLAGS}
    return {
        name: kinds[name].spellings.get(value, value)
        if name in kinds and isinstance(value, str)
        else value
        for name, value in options.items()
    }


def _field(option: Option) -> tuple:
    """`option`'s dataclass field: required ones have no default, a list's is a new list."""
    kind = option.kind.type if option.default is not None else option.kind.type | None
    if option.required:
        return option.dest, kind
    if isinstance(option.default, list):
        return option.dest, kind, dataclasses.field(default_factory=list)
    return option.dest, kind, dataclasses.field(default=option.default)


ConvertOptions = dataclasses.make_dataclass(
    "ConvertOptions",
    # The required ones first: `ConvertOptions(manifest, output, ...)`.
    [_field(option) for option in sorted(FLAGS, key=lambda option: not option.required)],
    bases=(_Options,),
)
ConvertOptions.__module__ = __name__  # pickled by name to Beam's workers (Python 3.12: `module=`)
ConvertOptions.__doc__ = """The job's own options, a field each (the flag's name without `--`;
`--no_progress`: `progress`), with the defaults their declarations give (the parser adds none).
A manifest may be one path, and paths `os.PathLike`."""


def option_defaults() -> dict[str, object]:
    """Every ConvertOptions field's default, by name."""
    return {option.dest: option.default for option in FLAGS if not option.required}
