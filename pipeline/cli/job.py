"""What the command prints of a Dataflow job: where to watch it, and its counters."""


def counters(result) -> dict[str, int]:
    """Beam counters of this job by name, summed over the steps that emit them."""
    from apache_beam.metrics.metric import MetricsFilter

    from tfrecord_pipeline.transforms.beam.steps import NAMESPACE

    query = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    totals: dict[str, int] = {}
    for counter in query["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        totals[counter.key.metric.name] = totals.get(counter.key.metric.name, 0) + (value or 0)
    return totals


def job_line(result, beam_args: tuple[str, ...]) -> str:
    """The job's console URL, or what a dry run did."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

    job_id = result.job_id() if hasattr(result, "job_id") else None
    if not job_id:
        return "dry run: the Dataflow job was built and not submitted"
    cloud = PipelineOptions(list(beam_args)).view_as(GoogleCloudOptions)
    return (
        f"Dataflow job {job_id}: https://console.cloud.google.com/dataflow/jobs/"
        f"{cloud.region}/{job_id}?project={cloud.project}"
    )
