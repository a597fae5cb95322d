"""A conversion's options checked once, and the configs its stages take whole.

`prepare` is the one place options are checked and the runner decided: the command line
(pipeline/cli/main.py), `run(argv)` and `convert(options)` (pipeline/runners/convert.py) all go
through it, before any work, so workers never meet a bad value, `--label_map` is read once and
Beam's flags are checked once. The runners then build each stage's config from the
`Conversion` it returns, never from the flags again.
"""

from typing import NamedTuple

from tfrecord_pipeline.config.options import ConvertOptions
from tfrecord_pipeline.config.presets import PRESETS
from tfrecord_pipeline.config.runner_choice import MAX_PROCESSES, Runner, describe, resolve
from tfrecord_pipeline.dataset.commit import CommitConfig
from tfrecord_pipeline.dataset.publish import Target
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.image.config import VALIDATE_MODES, ImageConfig
from tfrecord_pipeline.transforms.manifest.labels import CONTROL, LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig
from tfrecord_pipeline.transforms.manifest.sources import (
    ManifestFile,
    check_manifests,
    detection_config,
)
from tfrecord_pipeline.transforms.plan.dataset import LabelSource, PlanConfig
from tfrecord_pipeline.transforms.plan.sharding import ShardCounts
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write.formats import FILE_FORMATS
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig
from tfrecord_pipeline.version import __version__


class Conversion(NamedTuple):
    """One conversion as its checked options decide it: the runner, and what each stage's
    config is built from."""

    options: ConvertOptions  # as given: what the version's metadata records
    beam_args: tuple[str, ...]  # Beam's flags, passed to the pipeline untouched
    runner: Runner
    read: ReadConfig  # before the manifests say whether they list objects: see `manifests`
    shard_counts: ShardCounts
    label_map: LabelMap | None  # `--label_map`, read once
    image: ImageConfig

    def manifests(self) -> tuple[list[ManifestFile], ReadConfig]:
        """The manifests, each checked from its start, and how their rows are read: a
        detection dataset when they list objects. Raises UserError for manifests of both
        kinds, a COCO file beside other manifests (its labels are category ids, which other
        manifests' labels would renumber), and classification-only flags on detection."""
        options = self.options
        manifests = check_manifests(options.manifest, self.read)
        read_config = detection_config(manifests, self.read)
        coco = [manifest.path for manifest in manifests if manifest.kind == "coco"]
        if coco and len(coco) < len(manifests):
            other = next(m.path for m in manifests if m.kind != "coco")
            raise UserError(
                f"{coco[0]} is COCO and {other} is not: a COCO file's labels are its category "
                "ids, which other manifests' labels would renumber; convert them apart"
            )
        if read_config.detection and (options.multi_label or options.preset):
            flag = "--multi_label" if options.multi_label else f"--preset {options.preset}"
            raise UserError(f"{flag} is for classification; {manifests[0].path} lists objects")
        return manifests, read_config

    def plan_config(self, inherited: LabelMap | None, detection: bool) -> PlanConfig:
        """The planner's config: label ids from `--label_map`, else `inherited` (the published
        version's), else new; `detection` as the manifests say."""
        options = self.options
        labels = LabelSource(self.label_map, options.label_offset, inherited, options.freeze_labels)
        return PlanConfig(
            labels,
            self.shard_counts,
            options.target_shard_mb,
            options.max_file_bytes,
            detection,
            options.max_labels,
        )

    def write_config(self, staging: str, processes: int) -> WriteConfig:
        """What every shard writer needs: where (the run's staging folder), how, how many
        write at once, and how many of the runner's worker processes share each machine."""
        options = self.options
        return WriteConfig(
            staging,
            self.image,
            options.shard_format(),
            options.threads,
            processes,
            int(options.max_record_mb * 2**20),
            options.write_index,
            options.max_file_bytes,
            self.runner.sdk_processes,
            options.drop_negatives,
            options.masks,
            options.read_latency_ms,
        )

    def commit_config(self, target: Target) -> CommitConfig:
        options = self.options
        return CommitConfig(
            target, options.recorded(), __version__, options.max_error_rate, options.keep_versions
        )


def prepare(options: ConvertOptions, beam_args=(), test_pipeline=None) -> Conversion:
    """`options` and Beam's flags checked, and what they decide; raises UserError for the first
    wrong value. The runner is the one `beam_args` choose, or `test_pipeline`'s."""
    beam_args = tuple(beam_args)
    runner = resolve(beam_args)  # the runner's flags checked as Beam checks them
    if test_pipeline is not None:  # the pipeline given runs the conversion, whatever the flags
        runner = describe(test_pipeline.runner, test_pipeline.options)
    conversion = Conversion(
        options,
        beam_args,
        runner,
        read=options.read_config(),
        shard_counts=options.shard_counts(),
        label_map=options.pinned_labels(),
        image=options.image_config(),
    )
    _check_values(options)
    return conversion


def _check_values(options: ConvertOptions) -> None:
    """The checks that building the configs does not make (parsing --split, --num_shards,
    --label_map, --feature and --background checks those)."""
    if options.validate not in VALIDATE_MODES:
        raise UserError(f"--validate must be one of {', '.join(VALIDATE_MODES)}")
    checks = (
        (bool(options.output.strip()), "--output is empty; name the folder to write into"),
        (options.channels in (1, 3), "--channels must be 1 or 3"),
        (1 <= options.jpeg_quality <= 100, "--jpeg_quality must be between 1 and 100"),
        (options.target_shard_mb > 0, "--target_shard_mb must be positive"),
        (0 <= options.max_error_rate <= 1, "--max_error_rate must be between 0 and 1"),
        (options.label_offset >= 0, "--label_offset must be 0 or more"),
        (options.max_labels is None or options.max_labels > 0, "--max_labels must be positive"),
        (options.preset in (None, *PRESETS), f"--preset must be one of {', '.join(PRESETS)}"),
        (
            not (options.preset and options.multi_label),
            f"--preset {options.preset}: its readers take one label an image, not --multi_label",
        ),
        (options.max_pixels > 0, "--max_pixels must be positive"),
        (options.max_decode_mb > 0, "--max_decode_mb must be positive"),
        (options.max_scans > 0, "--max_scans must be positive"),
        (options.max_pixels_per_byte > 0, "--max_pixels_per_byte must be positive"),
        (options.max_metadata_mb > 0, "--max_metadata_mb must be positive"),
        (options.threads >= 0, "--threads must be 0 (automatic) or more"),
        (0 <= options.read_latency_ms <= 1000, "--read_latency_ms must be in [0, 1000]"),
        (
            0 <= options.processes <= MAX_PROCESSES,
            f"--processes must be 0 (automatic) to {MAX_PROCESSES:,}",
        ),
        (options.keep_versions >= 0, "--keep_versions must be 0 (keep all) or more"),
        (0 < options.max_record_mb <= 1024, "--max_record_mb must be in (0, 1024]"),
        (options.max_file_bytes > 0, "--max_file_mb must be positive"),
        (
            not (options.write_index and options.compression == "gzip"),
            "--write_index needs uncompressed shards (DALI indexes raw file offsets)",
        ),
        (options.file_format in FILE_FORMATS, f"--file_format must be one of {FILE_FORMATS}"),
        (
            not (options.shard_format().array_record and options.compression == "gzip"),
            "--compression gzip is for TFRecord shards, not ArrayRecord ones",
        ),
        (
            not (options.shard_format().array_record and options.write_index),
            "--write_index is for TFRecord shards; an ArrayRecord file holds its own index",
        ),
        (
            not options.image_root
            or fileio.is_remote(options.image_root)
            or fileio.is_dir(options.image_root),
            f"--image_root {options.image_root}: no such folder",
        ),
        _side_check("max_side", options.max_side),
        (
            bool(options.label_separator) and not CONTROL.search(options.label_separator),
            "--label_separator must be one or more printable characters",
        ),
        _side_check("resize_short_side", options.resize_short_side),
    )
    for ok, message in checks:
        if not ok:
            raise UserError(message)


def _side_check(name: str, side: int | None) -> tuple[bool, str]:
    """A resize flag's check: None does not resize, and a side of 0 pixels or fewer would
    silently resize nothing."""
    return (
        side is None or side > 0,
        f"--{name} takes a number of pixels, 1 or more (got {side}); leave it out not to resize",
    )
