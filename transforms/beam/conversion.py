"""The conversion as an Apache Beam pipeline: each stage's Beam form (transforms/stages.py), added
to the graph in the stages' order, each labelled with its stage's name.

manifests → rows → plan → rows keyed by shard → GroupByKey → shard writers → publish; only
manifest rows cross the shuffle. Error rows from every step are counted by a combiner and
written as errors files, grouped by file; the publish step is given the shards' and files'
results and the counts, never a row. Each form is a thin wrapper over the steps of this package,
themselves over the pure functions the local runner's forms (transforms/local/conversion.py)
call.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import apache_beam as beam
from apache_beam.pvalue import AsDict, AsList, AsSingleton, PCollection

from tfrecord_pipeline.transforms.beam.error_files import WriteErrors
from tfrecord_pipeline.transforms.beam.manifests import ReadManifests
from tfrecord_pipeline.transforms.beam.plan import AssignShards, DropDuplicateContent, PlanDataset
from tfrecord_pipeline.transforms.beam.refresh import RefreshRows
from tfrecord_pipeline.transforms.beam.shards import WriteShards
from tfrecord_pipeline.transforms.plan.carried import Unread
from tfrecord_pipeline.transforms.progress import SILENT, Progress
from tfrecord_pipeline.transforms.stages import Forms, Job, PublishInputs, stages_of
from tfrecord_pipeline.transforms.write import error_files
from tfrecord_pipeline.transforms.write.carried import assemble
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult


@dataclasses.dataclass
class BeamRun:
    """The graph on its way through the stages: the PCollections each Beam form reads and
    leaves."""

    job: Job
    p: beam.Pipeline
    progress: Progress
    read: Any = None  # ReadManifests' outputs, by tag
    plan: PCollection | None = None  # one DatasetPlan: the new version's
    write_plan: PCollection | None = None  # one DatasetPlan: the shards rows are written in
    rows: PCollection | None = None  # RowBatch
    errors: list[PCollection] = dataclasses.field(default_factory=list)  # ErrorRow
    refresh: Any = None  # RefreshRows' outputs, by tag
    keyed: Any = None  # AssignShards' outputs
    shards: PCollection | None = None  # ShardResult, one a final shard
    rejected: Any = None  # WriteErrors' outputs
    info: PCollection | None = None  # what the publish step returned


def build(p: beam.Pipeline, job: Job, progress: Progress = SILENT) -> PCollection:
    """Add `job`'s stages to `p`, reporting to `progress`; returns the PCollection holding
    what its publish step returns."""
    run = BeamRun(job, p, progress)
    for stage in stages_of(job):
        FORMS[stage.name](run, stage.name)
    return run.info


# Each stage's Beam form, by the stage's name (transforms/stages.py gives their order); each
# labels its step with that name.
FORMS = Forms()


@FORMS.of("ReadManifests")
def read_manifests(run: BeamRun, label: str) -> None:
    """manifests.py ReadManifests."""
    run.read = run.p | label >> ReadManifests(run.job.manifests, run.job.read)
    run.rows, run.errors = run.read["rows"], [run.read["errors"]]


@FORMS.of("PlanDataset")
def plan_dataset(run: BeamRun, label: str) -> None:
    """plan.py PlanDataset: a combiner."""
    run.plan = run.write_plan = run.rows | label >> PlanDataset(run.job.plan, run.progress)


@FORMS.of("DropDuplicateContent")
def drop_duplicates(run: BeamRun, label: str) -> None:
    """plan.py DropDuplicateContent."""
    # After the plan, which counts every row, so rows = records + errors.
    unique = run.rows | label >> DropDuplicateContent(run.job.max_file_bytes)
    run.rows, run.errors = unique["rows"], [*run.errors, unique["errors"]]


@FORMS.of("RefreshRows")
def refresh_rows(run: BeamRun, label: str) -> None:
    """refresh.py RefreshRows."""
    staging = run.job.write.staging
    unread = Unread(run.job.carried, run.job.read)
    run.refresh = run.rows | label >> RefreshRows(
        run.job.published, run.plan, staging, run.progress, unread
    )
    run.errors = [*run.errors, run.refresh["errors"]]
    layout = run.refresh["layout"]
    run.rows = run.refresh["rows"]
    run.plan = layout | "RefreshedPlan" >> beam.Map(lambda layout: layout.plan)
    run.write_plan = layout | "WritePlan" >> beam.Map(lambda layout: layout.write_plan)


@FORMS.of("AssignShards")
def assign_shards(run: BeamRun, label: str) -> None:
    """plan.py AssignShards."""
    run.keyed = run.rows | label >> AssignShards(run.write_plan)
    run.errors = [*run.errors, run.keyed.errors]


@FORMS.of("WriteShards")
def write_shards(run: BeamRun, label: str) -> None:
    """shards.py WriteShards."""
    written = run.keyed.keyed | label >> WriteShards(run.write_plan, run.job.write, run.progress)
    run.shards, run.errors = written["shards"], [*run.errors, written["errors"]]


@FORMS.of("CarryPublished")
def carry_published(run: BeamRun, label: str) -> None:
    """write/carried.py assemble.

    Each final shard assembled from its sources: the converted rows' shards and the published
    shards' kept records (staged by RefreshRows)."""
    write = run.job.write
    assembled = beam.FlatMap(
        assemble,
        AsList(run.shards),
        AsDict(run.refresh["carried"]),
        write.staging,
        write.shard_format,
    )
    run.shards = run.refresh["layout"] | label >> assembled.with_output_types(ShardResult)


@FORMS.of("WriteErrors")
def write_errors(run: BeamRun, label: str) -> None:
    """error_files.py WriteErrors."""
    errors = run.errors | "CollectErrors" >> beam.Flatten()
    staging = run.job.write.staging
    run.rejected = errors | label >> WriteErrors(staging, error_files.ROWS_PER_ERRORS_FILE)


class _PublishFn(beam.DoFn):
    """Runs once, on the plan, after all shards and errors files exist (their results and the
    counts are side inputs)."""

    def __init__(self, publish: Callable[[PublishInputs], Any]):
        self._publish = publish

    def process(self, plan, results, files, counts, skipped, negatives, layout=None):
        refreshed = layout.counts if layout is not None else None
        inputs = PublishInputs(
            plan, list(results), list(files), counts, skipped, negatives, refreshed
        )
        yield self._publish(inputs)


@FORMS.of("CommitDataset")
def commit_dataset(run: BeamRun, label: str) -> None:
    """_PublishFn: the job's publish step."""
    read = run.read
    skipped = read["skipped"] | "CountSkippedFiles" >> beam.combiners.Count.Globally()
    negatives = read["negatives"] | "CountDroppedNegatives" >> beam.combiners.Count.Globally()
    layout = {"layout": AsSingleton(run.refresh["layout"])} if run.refresh else {}
    run.info = run.plan | label >> beam.ParDo(
        _PublishFn(run.job.publish),
        AsList(run.shards),
        AsList(run.rejected["files"]),
        AsSingleton(run.rejected["counts"]),
        AsSingleton(skipped),
        AsSingleton(negatives),
        **layout,
    )
