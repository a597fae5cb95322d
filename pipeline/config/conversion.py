"""A conversion's options checked once, and the configs its stages take whole.

`prepare` is the one place options are checked and the runner decided: the command line
(pipeline/cli/main.py), `run(argv)` and `convert(options)` (pipeline/runners/convert.py) all go
through it, before any work, so workers never meet a bad value, `--label_map` is read once and
Beam's flags are checked once. The runners then build each stage's config from the
`Conversion` it returns, never from the flags again.
"""

from typing import NamedTuple

from tfrecord_pipeline.config.flags import FLAGS
from tfrecord_pipeline.config.option import failure
from tfrecord_pipeline.config.options import ConvertOptions
from tfrecord_pipeline.config.runner_choice import Runner, describe, resolve
from tfrecord_pipeline.config.values import Check
from tfrecord_pipeline.dataset.commit import CommitConfig
from tfrecord_pipeline.dataset.publish import Target
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig
from tfrecord_pipeline.transforms.manifest.sources import (
    ManifestFile,
    check_manifests,
    detection_config,
)
from tfrecord_pipeline.transforms.plan.dataset import LabelSource, PlanConfig
from tfrecord_pipeline.transforms.plan.sharding import LEAST_INDEXED_RECORDS, ShardCounts
from tfrecord_pipeline.transforms.storage import fileio
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
        if options.archive_order == "keep":
            read_config = read_config._replace(keep_order=len(manifests))
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

    def plan_config(
        self, inherited: LabelMap | None, detection: bool, declared: tuple[str, ...] = ()
    ) -> PlanConfig:
        """The planner's config: label ids from `--label_map`, else `inherited` (the published
        version's), else the names the manifests `declared` at their ids, else new;
        `detection` as the manifests say."""
        options = self.options
        labels = LabelSource(
            self.label_map, options.label_offset, inherited, options.freeze_labels, declared
        )
        return PlanConfig(
            labels,
            self.shard_counts,
            options.target_shard_mb,
            options.max_file_bytes,
            detection,
            options.max_labels,
            least_records=LEAST_INDEXED_RECORDS if options.write_index else 0,
        )

    def write_config(self, staging: str, processes: int) -> WriteConfig:
        """What every shard writer needs: where (the run's staging folder), how, how many
        write at once, and how many of the runner's worker processes share each machine."""
        options = self.options
        return WriteConfig(
            staging=staging,
            image=self.image,
            shard_format=options.shard_format(),
            threads=options.threads,
            processes=processes,
            max_record_bytes=int(options.max_record_mb * 2**20),
            write_index=options.write_index,
            max_file_bytes=options.max_file_bytes,
            sdk_processes=self.runner.sdk_processes,
            drop_negatives=options.drop_negatives,
            masks=options.masks,
            read_latency_ms=options.read_latency_ms,
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


# Checks of options together; each option's own check is in its declaration.
CROSS_CHECKS = (
    Check(
        lambda o: not (o.preset and o.multi_label),
        "--preset {preset}: its readers take one label an image, not --multi_label",
    ),
    Check(
        lambda o: not (o.write_index and o.compression == "gzip"),
        "--write_index needs uncompressed shards (DALI indexes raw file offsets)",
    ),
    Check(
        lambda o: not (o.shard_format().array_record and o.compression == "gzip"),
        "--compression gzip is for TFRecord shards, not ArrayRecord ones",
    ),
    Check(
        lambda o: not (o.shard_format().array_record and o.write_index),
        "--write_index is for TFRecord shards; an ArrayRecord file holds its own index",
    ),
    Check(
        lambda o: not o.image_root or fileio.is_remote(o.image_root) or fileio.is_dir(o.image_root),
        "--image_root {image_root}: no such folder",
    ),
)


def _check_values(options: ConvertOptions) -> None:
    """Each option's own check, then CROSS_CHECKS; raises UserError for the first wrong value
    (parsing --split, --num_shards, --label_map, --feature and --background checks those)."""
    for option in FLAGS:
        if said := failure(option, getattr(options, option.dest)):
            raise UserError(said)
    for check in CROSS_CHECKS:
        if not check.test(options):
            raise UserError(check.says.format_map(vars(options)))
