"""The conversion's own flags, as one dataclass; every other flag goes to Beam untouched."""

import argparse
import dataclasses

from pipeline.config.flags import FLAGS, help_text
from pipeline.config.presets import PRESETS
from pipeline.dataset.commit import CommitConfig
from pipeline.dataset.publish import Target
from pipeline.runners.choice import resolve
from pipeline.version import __version__
from transforms.errors import UserError
from transforms.image.images import VALIDATE_MODES, ImageConfig
from transforms.manifest.labels import CONTROL, LabelMap, parse_label_map
from transforms.manifest.rows import FEATURE_TYPES, ReadConfig
from transforms.manifest.sources import ManifestFile, check_manifests, detection_config
from transforms.manifest.splits import parse_split_spec
from transforms.plan.dataset import LabelSource, ShardCounts, parse_shard_counts
from transforms.plan.sharding import DEFAULT_TARGET_SHARD_MB
from transforms.storage import fileio
from transforms.tfrecord.examples import IMAGE_FEATURES, RAW_KEY
from transforms.tfrecord.records import MAX_RECORD_BYTES
from transforms.write.shard_writer import DEFAULT_MAX_FILE_MB, WriteConfig

# Flags that change how this machine runs the job, not the dataset: kept out of its metadata.
_LOCAL_ONLY = (
    "image_root",  # a path, as the manifests' are: moving the images changes no record
    "keep_versions",
    "incremental",
    "progress",
    "manifest",
    "output",
    "threads",
    "processes",
    "wait",
    "debug",
)


_IMAGE = ImageConfig()  # the image defaults live in one place: the workers' config


@dataclasses.dataclass
class ConvertOptions:
    """The job's own flags. Their defaults are the ones below: the parser adds none."""

    manifest: list[str]
    output: str
    image_root: str | None = None
    num_shards: int | str | None = None  # 8, "8" or "train=8,validation=2"
    target_shard_mb: float = DEFAULT_TARGET_SHARD_MB
    split: str | None = None
    label_map: str | None = None
    label_offset: int | None = None  # None: the preset's, else 0
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
    max_error_rate: float = 0.01
    threads: int = 0
    processes: int = 0
    wait: bool = False
    keep_versions: int = 0
    progress: bool = True
    debug: bool = False

    def __post_init__(self):
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

    def manifests(self) -> tuple[list[ManifestFile], ReadConfig]:
        """The manifests, each checked from its start, and how their rows are read: a
        detection dataset when they list objects. Raises UserError for manifests of both
        kinds, a COCO file beside other manifests (its labels are category ids, which other
        manifests' labels would renumber), and classification-only flags on detection."""
        read_config = self.read_config()
        manifests = check_manifests(self.manifest, read_config)
        read_config = detection_config(manifests, read_config)
        coco = [manifest.path for manifest in manifests if manifest.kind == "coco"]
        if coco and len(coco) < len(manifests):
            other = next(m.path for m in manifests if m.kind != "coco")
            raise UserError(
                f"{coco[0]} is COCO and {other} is not: a COCO file's labels are its category "
                "ids, which other manifests' labels would renumber; convert them apart"
            )
        if read_config.detection and (self.multi_label or self.preset):
            flag = "--multi_label" if self.multi_label else f"--preset {self.preset}"
            raise UserError(f"{flag} is for classification; {manifests[0].path} lists objects")
        return manifests, read_config

    def image_config(self) -> ImageConfig:
        return ImageConfig(
            validate=self.validate,
            channels=self.channels,
            jpeg_quality=self.jpeg_quality,
            max_pixels=self.max_pixels,
            max_scans=self.max_scans,
            max_decode_bytes=int(self.max_decode_mb * 2**20),
            max_side=self.max_side,
            resize_short_side=self.resize_short_side,
            resample=self.resample,
            exif_transpose=self.exif_transpose,
            background=parse_colour(self.background),
            encoding=self.image_encoding,
        )

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 2**20)

    def shard_counts(self) -> ShardCounts:
        return parse_shard_counts(self.num_shards)

    def label_source(self, inherited: LabelMap | None) -> LabelSource:
        """Label ids: `--label_map`, else `inherited` (the published version's), else new."""
        return LabelSource(self.pinned_labels(), self.label_offset, inherited, self.freeze_labels)

    def pinned_labels(self) -> LabelMap | None:
        if not self.label_map:
            return None
        try:
            return parse_label_map(fileio.read_text(self.label_map), self.label_offset)
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

    def validate_values(self) -> None:
        """Check every option once, in the launcher, so workers never meet a bad value."""
        self.read_config(), self.shard_counts(), self.pinned_labels(), self.image_config()
        if self.validate not in VALIDATE_MODES:
            raise UserError(f"--validate must be one of {', '.join(VALIDATE_MODES)}")
        checks = (
            (bool(self.output.strip()), "--output is empty; name the folder to write into"),
            (self.channels in (1, 3), "--channels must be 1 or 3"),
            (1 <= self.jpeg_quality <= 100, "--jpeg_quality must be between 1 and 100"),
            (self.target_shard_mb > 0, "--target_shard_mb must be positive"),
            (0 <= self.max_error_rate <= 1, "--max_error_rate must be between 0 and 1"),
            (self.label_offset >= 0, "--label_offset must be 0 or more"),
            (self.preset in (None, *PRESETS), f"--preset must be one of {', '.join(PRESETS)}"),
            (
                not (self.preset and self.multi_label),
                f"--preset {self.preset}: its readers take one label an image, not --multi_label",
            ),
            (self.max_pixels > 0, "--max_pixels must be positive"),
            (self.max_decode_mb > 0, "--max_decode_mb must be positive"),
            (self.max_scans > 0, "--max_scans must be positive"),
            (self.threads >= 0, "--threads must be 0 (automatic) or more"),
            (self.processes >= 0, "--processes must be 0 (automatic) or more"),
            (self.keep_versions >= 0, "--keep_versions must be 0 (keep all) or more"),
            (0 < self.max_record_mb <= 1024, "--max_record_mb must be in (0, 1024]"),
            (self.max_file_bytes > 0, "--max_file_mb must be positive"),
            (
                not (self.write_index and self.compression == "gzip"),
                "--write_index needs uncompressed shards (DALI indexes raw file offsets)",
            ),
            (
                not self.image_root
                or fileio.is_remote(self.image_root)
                or fileio.is_dir(self.image_root),
                f"--image_root {self.image_root}: no such folder",
            ),
            ((self.max_side or 1) > 0, "--max_side must be positive"),
            (
                bool(self.label_separator) and not CONTROL.search(self.label_separator),
                "--label_separator must be one or more printable characters",
            ),
            ((self.resize_short_side or 1) > 0, "--resize_short_side must be positive"),
        )
        for ok, message in checks:
            if not ok:
                raise UserError(message)

    def write_config(
        self, staging: str, progress_dir: str | None, processes: int, sdk_processes: int = 1
    ) -> WriteConfig:
        """What every shard writer needs: where (the run's staging folder), how, how many
        write at once, and how many worker processes share each machine."""
        return WriteConfig(
            staging,
            self.image_config(),
            self.compression == "gzip",
            progress_dir,
            self.threads,
            processes,
            int(self.max_record_mb * 2**20),
            self.write_index,
            self.max_file_bytes,
            sdk_processes,
            self.drop_negatives,
            self.masks,
        )

    def commit(self, target: Target) -> CommitConfig:
        return CommitConfig(
            target, self.recorded(), __version__, self.max_error_rate, self.keep_versions
        )

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


class UserErrorParser(argparse.ArgumentParser):
    """argparse that raises UserError (one line from the CLI) instead of exiting."""

    def error(self, message):
        raise UserError(message)


def _parser() -> argparse.ArgumentParser:
    """The parser of `convert`'s flags, made from FLAGS; absent flags take ConvertOptions'
    defaults, which --help shows."""
    parser = UserErrorParser(
        prog="tfrecord-pipeline convert",
        description="Turn image/label manifests into sharded TFRecord files.",
        epilog="Any other flag is a Beam pipeline flag (--runner, --project, ...) and runs the "
        "conversion as a Beam pipeline; a flag neither knows is refused. The README's Usage "
        "and Runners sections say more.",
        allow_abbrev=False,
        argument_default=argparse.SUPPRESS,
    )
    defaults = option_defaults()
    for flag in FLAGS:
        value = {"metavar": flag.value} if flag.value else {}
        parser.add_argument(flag.name, help=help_text(flag, defaults), **value, **flag.parse)
    return parser


def option_defaults() -> dict[str, object]:
    """Every ConvertOptions field's default, by name."""
    return dataclasses.asdict(ConvertOptions(manifest=[], output=""))


def _beam_options():
    """Beam's options module, imported only when there are Beam flags: Beam takes seconds to
    import, and a local run without Beam flags never needs it."""
    from apache_beam.options import pipeline_options

    return pipeline_options


def _check_beam_flags(beam_args: list[str]) -> None:
    """Beam drops flags it does not know with only a log line; a typo must stop the job."""
    beam_options = _beam_options()
    parser = beam_options._BeamArgumentParser(allow_abbrev=False)  # the parser Beam itself uses
    for options_class in beam_options.PipelineOptions.__subclasses__():
        options_class._add_argparse_args(parser)
    _, unknown = parser.parse_known_args(beam_args)
    if unknown:
        raise UserError(f"unknown flag(s): {' '.join(unknown)}")


def parse_args(argv: list[str]) -> tuple[ConvertOptions, list[str]]:
    """Split argv into the conversion's options and Beam's pipeline flags; both checked."""
    known, beam_args = _parser().parse_known_args(argv)
    if beam_args:
        _check_beam_flags(beam_args)
    resolve(beam_args)  # the runner's flags checked as Beam checks them
    options = ConvertOptions(**vars(known))
    options.validate_values()
    if options.processes and beam_args:
        raise UserError(
            "--processes is for local runs without Beam flags; Beam runners start their own "
            "workers (on this machine: --direct_num_workers)"
        )
    return options, beam_args
