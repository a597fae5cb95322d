"""The conversion on this machine without Beam: the stages' local forms
(transforms/local/conversion.py), given the job the options make. Any Beam flag
(`--runner DirectRunner`, `--runner DataflowRunner`, ...) runs the Beam pipeline instead
(pipeline/runners/beam_pipeline.py); both write the same bytes."""

from tfrecord_pipeline.config.conversion import Conversion
from tfrecord_pipeline.config.runner_choice import local_processes
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.dataset.publish import Target
from tfrecord_pipeline.runners.job import conversion_job
from tfrecord_pipeline.transforms.local.conversion import run_here, writer_processes
from tfrecord_pipeline.transforms.progress import Watch


def convert_here(conversion: Conversion, target: Target, watch: Watch) -> DatasetInfo:
    """Run the whole conversion into `target`, in this process and its shard-writer
    processes, reporting to the observer `watch` gives."""
    processes = local_processes(conversion.options.processes)
    write = conversion.write_config(target.staging, processes)
    with writer_processes(write) as pool:  # before any thread of the run starts
        job = conversion_job(conversion, target, write)
        return run_here(job, pool, watch)
