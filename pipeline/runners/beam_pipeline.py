"""The conversion as an Apache Beam pipeline: what runs on Dataflow, or with any Beam flag. The
stages' Beam forms (transforms/beam/conversion.py), given the job the options make; the
Beam-free local runner (pipeline/runners/local.py) runs their local forms and writes the same
bytes."""

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from tfrecord_pipeline.config.conversion import Conversion
from tfrecord_pipeline.dataset.publish import Target
from tfrecord_pipeline.runners.job import conversion_job
from tfrecord_pipeline.transforms.beam.conversion import build
from tfrecord_pipeline.transforms.progress import SILENT, Progress


def build_pipeline(
    p: beam.Pipeline, conversion: Conversion, target: Target, progress: Progress = SILENT
):
    """Add the conversion into `target` to `p` (the pipeline `conversion` was prepared for:
    pipeline/config/conversion.py `prepare`), its steps reporting to `progress`; returns the
    PCollection holding the one DatasetInfo."""
    job = conversion_job(conversion, target, conversion.write_config(target.staging, 1))
    return build(p, job, progress)


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
