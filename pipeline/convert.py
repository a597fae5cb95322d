"""Assembling and running a conversion: manifests → shards → metadata → commit marker."""

import contextlib
import glob as local_glob
import tempfile

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.pvalue import AsList, AsSingleton

from pipeline.commit import CommitDataset, prepare_output, read_info
from pipeline.metadata import DatasetInfo
from pipeline.options import ConvertOptions, is_local, parse_args, writer_processes
from pipeline.progress import ProgressBar
from pipeline.version import __version__
from transforms import fileio
from transforms.errors import UserError
from transforms.manifest import check_manifest
from transforms.shard_writer import WriteConfig
from transforms.steps import (
    AssignShards,
    DropDuplicateContent,
    PlanDataset,
    ReadManifests,
    WriteShards,
)


def expand_manifests(patterns: list[str]) -> list[str]:
    """Manifest paths from paths, globs and folders; every one must exist and be reachable."""
    try:
        return _expand(patterns)
    except fileio.READ_ERRORS as error:
        raise UserError(f"--manifest: cannot reach {' '.join(patterns)} ({error})") from None


def _expand(patterns: list[str]) -> list[str]:
    paths = []
    for pattern in patterns:
        if fileio.is_dir(pattern):
            paths.append(pattern)
        elif local_glob.has_magic(pattern):
            matched = fileio.glob(pattern)
            if not matched:
                raise UserError(f"--manifest {pattern}: no file matches")
            paths += matched
        elif fileio.exists(pattern):
            paths.append(pattern)
        else:
            raise UserError(f"--manifest {pattern}: no such file or folder")
    return sorted(set(paths), key=paths.index)


def build_pipeline(p: beam.Pipeline, options: ConvertOptions, progress_dir: str | None = None):
    """Add the conversion to `p`; returns the PCollection holding the one DatasetInfo."""
    manifests = expand_manifests(options.manifest)
    read_config = options.read_config()
    for path in manifests:
        check_manifest(path, read_config)
    write_config = WriteConfig(
        options.output,
        options.image_config(),
        options.compression == "gzip",
        progress_dir,
        options.threads,
        writer_processes(options.processes, p.options),
        int(options.max_record_mb * 2**20),
        options.write_index,
    )

    read = p | "ReadManifests" >> ReadManifests(manifests, read_config)
    plan = read.rows | "PlanDataset" >> PlanDataset(
        options.pinned_labels(),
        options.label_offset,
        options.shard_counts(),
        options.target_shard_mb,
        progress_dir,
    )
    rows, errors = read.rows, [read.errors]
    if options.dedup:  # after the plan, which counts every row, so rows = records + errors
        unique = rows | "DropDuplicateContent" >> DropDuplicateContent()
        rows, errors = unique["rows"], [*errors, unique["errors"]]
    keyed = rows | "AssignShards" >> AssignShards(plan)
    shards = keyed.keyed | "WriteShards" >> WriteShards(plan, write_config)
    errors = (*errors, keyed.errors, shards.errors) | "CollectErrors" >> beam.Flatten()
    skipped = read.skipped | "CountSkippedFiles" >> beam.combiners.Count.Globally()
    commit = CommitDataset(options.output, options.recorded(), __version__, options.max_error_rate)
    return plan | "CommitDataset" >> beam.ParDo(
        commit, AsList(shards.shards), AsList(errors), AsSingleton(skipped)
    )


def run(argv: list[str] | None = None, test_pipeline: beam.Pipeline | None = None) -> DatasetInfo:
    """Parse flags, convert, and return the dataset's metadata (committed or not)."""
    options, beam_args = parse_args(list(argv or []))
    return convert(options, beam_args, test_pipeline)


def launch(
    options: ConvertOptions,
    beam_args=(),
    test_pipeline: beam.Pipeline | None = None,
    progress_dir: str | None = None,
):
    """Check the output folder, build the pipeline and start it; returns Beam's result at once
    on Dataflow (the job runs remotely), after the run on the DirectRunner."""
    options.validate_values()
    prepare_output(options.output, options.overwrite)
    p = test_pipeline or beam.Pipeline(options=PipelineOptions(list(beam_args)))
    build_pipeline(p, options, progress_dir)
    return p.run()


def convert(
    options: ConvertOptions, beam_args=(), test_pipeline: beam.Pipeline | None = None
) -> DatasetInfo:
    """The Python API: run one conversion to the end and return its metadata."""
    show_progress = options.progress and test_pipeline is None and is_local(list(beam_args))
    with contextlib.ExitStack() as stack:
        progress_dir = None
        if show_progress:
            progress_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="tfrp-"))
            stack.enter_context(ProgressBar(progress_dir))
        launch(options, beam_args, test_pipeline, progress_dir).wait_until_finish()
    return read_info(options.output)
