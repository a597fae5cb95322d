"""The conversion as an Apache Beam pipeline: what runs on Dataflow, or with any Beam flag.

manifests → rows → plan → rows keyed by shard → GroupByKey → shard writers → commit; only
manifest rows cross the shuffle. Each step is a thin wrapper (transforms/steps.py) over the same
functions the Beam-free local runner (pipeline/local.py) calls.
"""

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.pvalue import AsList, AsSingleton

from pipeline import refresh
from pipeline.commit import Commit, commit_dataset
from pipeline.metadata import DatasetInfo
from pipeline.options import ConvertOptions
from pipeline.publish import Target
from pipeline.runners import describe, writer_processes
from transforms.manifest import check_manifests
from transforms.steps import (
    AssignShards,
    DropDuplicateContent,
    PlanDataset,
    ReadManifests,
    WriteShards,
)


@beam.typehints.with_output_types(DatasetInfo)
class _CommitFn(beam.DoFn):
    """Runs once, on the plan, after all shards exist (their results are side inputs)."""

    def __init__(self, commit: Commit):
        self._commit = commit

    def process(self, plan, results, errors, skipped):
        yield commit_dataset(self._commit, plan, list(results), list(errors), skipped)


def build_pipeline(
    p: beam.Pipeline, options: ConvertOptions, target: Target, progress_dir: str | None = None
):
    """Add the conversion into `target` to `p`; returns the PCollection holding the one
    DatasetInfo."""
    read_config = options.read_config()
    manifests = check_manifests(options.manifest, read_config)
    processes = writer_processes(options.processes, describe(p.runner, p.options))
    write_config = options.write_config(target.staging, progress_dir, processes)

    previous = refresh.published(target)
    refresh.check_label_offset(previous, options.label_offset)
    inherited = previous.labels() if previous else None
    read = p | "ReadManifests" >> ReadManifests(manifests, read_config)
    plan = read.rows | "PlanDataset" >> PlanDataset(
        options.label_source(inherited),
        options.shard_counts(),
        options.target_shard_mb,
        progress_dir,
        options.max_file_bytes,
    )
    rows, errors = read.rows, [read.errors]
    if options.dedup:  # after the plan, which counts every row, so rows = records + errors
        unique = rows | "DropDuplicateContent" >> DropDuplicateContent(options.max_file_bytes)
        rows, errors = unique["rows"], [*errors, unique["errors"]]
    keyed = rows | "AssignShards" >> AssignShards(plan)
    shards = keyed.keyed | "WriteShards" >> WriteShards(plan, write_config)
    errors = (*errors, keyed.errors, shards.errors) | "CollectErrors" >> beam.Flatten()
    skipped = read.skipped | "CountSkippedFiles" >> beam.combiners.Count.Globally()
    return plan | "CommitDataset" >> beam.ParDo(
        _CommitFn(options.commit(target)),
        AsList(shards.shards),
        AsList(errors),
        AsSingleton(skipped),
    )


def launch(
    options: ConvertOptions,
    target: Target,
    beam_args=(),
    test_pipeline: beam.Pipeline | None = None,
    progress_dir: str | None = None,
):
    """Build the pipeline that writes and publishes `target`, and start it; returns Beam's
    result at once on Dataflow (the job runs remotely), after the run on the DirectRunner."""
    options.validate_values()
    p = test_pipeline or beam.Pipeline(options=PipelineOptions(list(beam_args)))
    build_pipeline(p, options, target, progress_dir)
    return p.run()
