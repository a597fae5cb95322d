"""A conversion's options made into the job its stages are given (transforms/stages.py `Job`):
typed configs, the published version a refresh starts from, and the publish step."""

import functools

from tfrecord_pipeline.config.conversion import Conversion
from tfrecord_pipeline.dataset.commit import commit_dataset
from tfrecord_pipeline.dataset.previous import previous_version
from tfrecord_pipeline.dataset.publish import Target
from tfrecord_pipeline.runners.refreshable import refreshable
from tfrecord_pipeline.transforms.manifest.embedded import declared_names
from tfrecord_pipeline.transforms.stages import Job
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig


def conversion_job(conversion: Conversion, target: Target, write: WriteConfig) -> Job:
    """The job of `conversion` into `target`, its shards written as `write` says: the
    version it starts from read (its labels are inherited; --incremental refreshes it when
    its options allow), the manifests' starts checked; a container read in order is unpacked
    into the run's staging folder (transforms/archive/unpack.py), deleted at the commit."""
    options = conversion.options
    previous = previous_version(target, options.label_offset)
    manifests, read_config = conversion.manifests()
    read_config = read_config._replace(unpack_to=target.staging)
    inherited = previous.labels() if previous else None
    refreshing = options.incremental and refreshable(previous, options.recorded())
    return Job(
        manifests=manifests,
        read=read_config,
        plan=conversion.plan_config(inherited, read_config.detection, declared_names(manifests)),
        write=write,
        dedup=options.dedup,
        max_file_bytes=options.max_file_bytes,
        published=previous.published() if refreshing else None,
        publish=functools.partial(commit_dataset, conversion.commit_config(target)),
    )
