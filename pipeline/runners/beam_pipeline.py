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

from pipeline.config.conversion import Conversion
from pipeline.dataset.commit import CommitConfig, CommitInputs, commit_dataset
from pipeline.dataset.metadata import DatasetInfo
from pipeline.dataset.previous import previous_version
from pipeline.dataset.publish import Target
from pipeline.runners import refresh
from transforms.beam.error_files import WriteErrors
from transforms.beam.manifests import ReadManifests
from transforms.beam.plan import AssignShards, DropDuplicateContent, PlanDataset
from transforms.beam.shards import WriteShards
from transforms.progress import SILENT, Progress
from transforms.write import error_files


@beam.typehints.with_output_types(DatasetInfo)
class _CommitFn(beam.DoFn):
    """Runs once, on the plan, after all shards and errors files exist (their results and the
    error counts are side inputs); after a refresh, names the new version's shards first
    (pipeline/runners/refresh.py `assemble`)."""

    def __init__(self, config: CommitConfig, refreshed: bool, compress: bool):
        self._config = config
        self._refreshed = refreshed
        self._compress = compress

    def process(self, plan, results, error_files, error_counts, skipped, negatives):
        results = list(results)
        if self._refreshed:
            results, counts = refresh.assemble(results, self._config.target.staging, self._compress)
            plan = plan._replace(shards=counts)
        inputs = CommitInputs(plan, results, list(error_files), error_counts, skipped, negatives)
        yield commit_dataset(self._config, inputs)


@beam.ptransform_fn
def _CountBySplit(batches):
    """Rows per split: (split, count)."""
    return (
        batches
        | "SplitOfEachRow" >> beam.FlatMap(lambda batch: [(row.split, 1) for row in batch.rows])
        | "Sum" >> beam.CombinePerKey(sum)
    )


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
    write_plan, carried = plan, []
    refreshed = options.incremental and refresh.refreshable(previous, options.recorded())
    if refreshed:
        from pipeline.runners.beam_refresh import RefreshRows

        update = rows | "RefreshRows" >> RefreshRows(previous, target.staging, progress)
        rows, carried = update["rows"], [update["carried"]]
        write_plan = plan | "PlanNewShards" >> beam.Map(
            refresh.delta_plan, AsDict(rows | "CountBySplit" >> _CountBySplit()), previous
        )
    keyed = rows | "AssignShards" >> AssignShards(write_plan)
    shards = keyed.keyed | "WriteShards" >> WriteShards(write_plan, write_config, progress)
    results = (shards["shards"], *carried) | "CollectShards" >> beam.Flatten()
    errors = (*errors, keyed.errors, shards["errors"]) | "CollectErrors" >> beam.Flatten()
    rejected = errors | "WriteErrors" >> WriteErrors(
        target.staging, error_files.ROWS_PER_ERRORS_FILE
    )
    skipped = read["skipped"] | "CountSkippedFiles" >> beam.combiners.Count.Globally()
    negatives = read["negatives"] | "CountDroppedNegatives" >> beam.combiners.Count.Globally()
    commit = _CommitFn(conversion.commit_config(target), refreshed, options.compression == "gzip")
    return plan | "CommitDataset" >> beam.ParDo(
        commit,
        AsList(results),
        AsList(rejected["files"]),
        AsSingleton(rejected["counts"]),
        AsSingleton(skipped),
        AsSingleton(negatives),
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
