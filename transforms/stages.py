"""The stages of a conversion, in order: the one list both executors run.

Each stage has one pure function that decides (named here, as `module:function` under the
installed package, so this list imports nothing heavy), a Beam form
(transforms/beam/conversion.py, over the steps of transforms/beam/) and a local form
(transforms/local/conversion.py, over transforms/local/). Each executor holds its forms by the
stage's name and runs them in this order, skipping a stage its job does not need; a test
keeps both executors' forms, and docs/architecture.md's picture, equal to this list. The
name is the step's label on the Beam graph (on Dataflow, the stage a user sees).

A job is what every stage is given: typed configs the pipeline side made from the options,
and the publish step as a function (it lives with publication, on the pipeline side, which
this package never imports).
"""

from collections.abc import Callable
from typing import Any, NamedTuple

from tfrecord_pipeline.transforms.manifest.rows import ReadConfig
from tfrecord_pipeline.transforms.manifest.sources import ManifestFile
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan, PlanConfig
from tfrecord_pipeline.transforms.plan.refresh import RefreshCounts
from tfrecord_pipeline.transforms.write.error_files import ErrorCounts, ErrorFileResult
from tfrecord_pipeline.transforms.write.published import PublishedVersion
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult, WriteConfig


class PublishInputs(NamedTuple):
    """What the publish stage is given by the stages before it (as side inputs on Beam): a
    result per shard and per errors file, and counts; never a row, so its size does not grow
    with the rows rejected."""

    plan: DatasetPlan
    results: list[ShardResult]
    error_files: list[ErrorFileResult]
    error_counts: ErrorCounts
    skipped: int  # files a class-folder tree skipped
    negatives_dropped: int = 0  # detection rows without objects, with --drop_negatives
    refresh: RefreshCounts | None = None  # what a refresh made the version of


class Job(NamedTuple):
    """One conversion, as its stages are given it."""

    manifests: list[ManifestFile]
    read: ReadConfig
    plan: PlanConfig
    write: WriteConfig  # its staging folder is the run's: every file is written there first
    dedup: bool  # --dedup: rows whose image bytes repeat an earlier row's become errors
    max_file_bytes: int
    # --incremental with a published version it can refresh: that version (its folder, its
    # metadata's shards); None converts every row.
    published: PublishedVersion | None
    # The publish stage: the version described, its files moved in and, past its gates,
    # published; returns its metadata. Picklable (a Beam worker runs it).
    publish: Callable[[PublishInputs], Any]
    # Archives --incremental carries unread (transforms/plan/carried.py): not in `manifests`;
    # listed by the refresh only where a published shard of their records is damaged.
    carried: tuple[ManifestFile, ...] = ()


class Stage(NamedTuple):
    name: str
    decides: str  # the pure function that decides, `module:function` under tfrecord_pipeline
    when: str = ""  # the option a job needs to run it; "" runs it always

    def needs(self, job: Job) -> bool:
        """Whether `job` runs this stage."""
        return {"": True, "--dedup": job.dedup, "--incremental": job.published is not None}[
            self.when
        ]


STAGES = (
    Stage("ReadManifests", "transforms.manifest.sources:read_piece"),
    Stage("PlanDataset", "transforms.plan.dataset:decide_plan"),
    Stage("DropDuplicateContent", "transforms.plan.dedup:keep_first", "--dedup"),
    Stage("RefreshRows", "transforms.plan.refresh:stays", "--incremental"),
    Stage("AssignShards", "transforms.plan.grouping:group_by_shard"),
    Stage("WriteShards", "transforms.write.shard_writer:write_shard"),
    Stage("CarryPublished", "transforms.plan.refresh:refresh_layout", "--incremental"),
    Stage("WriteErrors", "transforms.write.error_files:file_of"),
    Stage("CommitDataset", "dataset.commit:commit_dataset"),
)


class Forms(dict):
    """An executor's forms of the stages, by the stage's name: each form is registered where it
    is defined, `@FORMS.of("ReadManifests")`, and run in the order of STAGES, not this one."""

    def of(self, name: str) -> Callable:
        if name not in {stage.name for stage in STAGES}:
            raise KeyError(f"no stage is named {name}")

        def register(form: Callable) -> Callable:
            self[name] = form
            return form

        return register


def stages_of(job: Job) -> list[Stage]:
    """The stages `job` runs, in order."""
    return [stage for stage in STAGES if stage.needs(job)]
