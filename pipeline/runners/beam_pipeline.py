"""The conversion as an Apache Beam pipeline: what runs on Dataflow, or with any Beam flag.

manifests → rows → plan → rows keyed by shard → GroupByKey → shard writers → commit; only
manifest rows cross the shuffle. Error rows from every step are counted by a combiner and
written as errors files, grouped by file; the commit step is given the shards' and files'
results and the counts, never a row. Each step is a thin wrapper (transforms/beam/) over the same
functions the Beam-free local runner (pipeline/runners/local.py) calls.
"""

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.pvalue import AsDict, AsList, AsSingleton

from tfrecord_pipeline.config.conversion import Conversion
from tfrecord_pipeline.dataset.commit import CommitConfig, CommitInputs, commit_dataset
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.dataset.previous import previous_version
from tfrecord_pipeline.dataset.publish import Target
from tfrecord_pipeline.runners.refreshable import refreshable
from tfrecord_pipeline.transforms.beam.error_files import WriteErrors
from tfrecord_pipeline.transforms.beam.manifests import ReadManifests
from tfrecord_pipeline.transforms.beam.plan import AssignShards, DropDuplicateContent, PlanDataset
from tfrecord_pipeline.transforms.beam.shards import WriteShards
from tfrecord_pipeline.transforms.progress import SILENT, Progress
from tfrecord_pipeline.transforms.write import error_files
from tfrecord_pipeline.transforms.write.carried import assemble
from tfrecord_pipeline.transforms.write.formats import ShardFormat


@beam.typehints.with_output_types(DatasetInfo)
class _CommitFn(beam.DoFn):
    """Runs once, on the plan, after all shards and errors files exist (their results and the
    error counts are side inputs); after a refresh, on its layout's plan, each final shard
    assembled from its sources first (transforms/write/carried.py `assemble`)."""

    def __init__(self, config: CommitConfig, shard_format: ShardFormat):
        self._config = config
        self._shard_format = shard_format

    def process(
        self,
        plan,
        results,
        error_files,
        error_counts,
        skipped,
        negatives,
        layout=None,
        carried=None,
    ):
        results, counts = list(results), None
        if layout is not None:
            staging = self._config.target.staging
            results = assemble(layout, results, carried, staging, self._shard_format)
            plan, counts = layout.plan, layout.counts
        inputs = CommitInputs(
            plan, results, list(error_files), error_counts, skipped, negatives, counts
        )
        yield commit_dataset(self._config, inputs)


def build_pipeline(
    p: beam.Pipeline, conversion: Conversion, target: Target, progress: Progress = SILENT
):
    """Add the conversion into `target` to `p` (the pipeline `conversion` was prepared for:
    pipeline/config/conversion.py `prepare`), its steps reporting to `progress`; returns the
    PCollection holding the one DatasetInfo."""
    options = conversion.options
    manifests, read_config = conversion.manifests()
    write_config = conversion.write_config(target.staging, 1)

    previous = previous_version(target, options.label_offset)
    inherited = previous.labels() if previous else None
    plan_config = conversion.plan_config(inherited, read_config.detection)
    read = p | "ReadManifests" >> ReadManifests(manifests, read_config)
    plan = read["rows"] | "PlanDataset" >> PlanDataset(plan_config, progress)
    rows, errors = read["rows"], [read["errors"]]
    if options.dedup:  # after the plan, which counts every row, so rows = records + errors
        unique = rows | "DropDuplicateContent" >> DropDuplicateContent(options.max_file_bytes)
        rows, errors = unique["rows"], [*errors, unique["errors"]]
    write_plan, refreshed = plan, {}
    if options.incremental and refreshable(previous, options.recorded()):
        from tfrecord_pipeline.transforms.beam.refresh import RefreshRows

        published = previous.published()
        update = rows | "RefreshRows" >> RefreshRows(published, plan, target.staging, progress)
        rows, layout = update["rows"], update["layout"]
        write_plan = layout | "WritePlan" >> beam.Map(lambda layout: layout.write_plan)
        refreshed = {"layout": AsSingleton(layout), "carried": AsDict(update["carried"])}
    keyed = rows | "AssignShards" >> AssignShards(write_plan)
    shards = keyed.keyed | "WriteShards" >> WriteShards(write_plan, write_config, progress)
    errors = (*errors, keyed.errors, shards["errors"]) | "CollectErrors" >> beam.Flatten()
    rejected = errors | "WriteErrors" >> WriteErrors(
        target.staging, error_files.ROWS_PER_ERRORS_FILE
    )
    skipped = read["skipped"] | "CountSkippedFiles" >> beam.combiners.Count.Globally()
    negatives = read["negatives"] | "CountDroppedNegatives" >> beam.combiners.Count.Globally()
    commit = _CommitFn(conversion.commit_config(target), options.shard_format())
    return plan | "CommitDataset" >> beam.ParDo(
        commit,
        AsList(shards["shards"]),
        AsList(rejected["files"]),
        AsSingleton(rejected["counts"]),
        AsSingleton(skipped),
        AsSingleton(negatives),
        **refreshed,
    )


def launch(
    conversion: Conversion,
    target: Target,
    test_pipeline: beam.Pipeline | None = None,
    progress: Progress = SILENT,
):
    """Build the pipeline that writes and publishes `target`, and start it; returns Beam's
    result at once on Dataflow (the job runs remotely), after the run on the DirectRunner."""
    p = test_pipeline or beam.Pipeline(options=PipelineOptions(list(conversion.beam_args)))
    build_pipeline(p, conversion, target, progress)
    return p.run()
