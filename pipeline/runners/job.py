"""A conversion's options made into the job its stages are given (transforms/stages.py `Job`):
typed configs, the published version a refresh starts from, and the publish step."""

import functools
import sys

from tfrecord_pipeline.config.conversion import Conversion
from tfrecord_pipeline.dataset.commit import commit_dataset
from tfrecord_pipeline.dataset.previous import previous_version
from tfrecord_pipeline.dataset.publish import Target
from tfrecord_pipeline.runners.refreshable import refreshable
from tfrecord_pipeline.transforms.manifest.embedded import declared_names
from tfrecord_pipeline.transforms.manifest.sources import ManifestFile
from tfrecord_pipeline.transforms.plan.carried import ArchiveLine, carried_lines
from tfrecord_pipeline.transforms.stages import Job
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig


def conversion_job(conversion: Conversion, target: Target, write: WriteConfig) -> Job:
    """The job of `conversion` into `target`, its shards written as `write` says: the
    version it starts from read (its labels are inherited; --incremental refreshes it when
    its options allow), the manifests' starts checked; a container read in order is unpacked
    into the run's staging folder (transforms/archive/unpack.py), deleted at the commit. An
    archive a refresh carries unread (transforms/plan/carried.py) is read by no stage but the
    refresh's, and only if a published shard of its records is found damaged."""
    options = conversion.options
    previous = previous_version(target, options.label_offset)
    manifests, read_config = conversion.manifests()
    read_config = read_config._replace(unpack_to=target.staging)
    inherited = previous.labels() if previous else None
    refreshing = options.incremental and refreshable(previous, options.recorded())
    archives = {m.path: m.identity for m in manifests if m.kind == "archive"}
    lines = carried_lines(archives, previous.archives()) if refreshing else []
    carried = _carried(manifests, lines)
    plan = conversion.plan_config(inherited, read_config.detection, declared_names(manifests))
    commit = conversion.commit_config(target)._replace(archives=tuple(sorted(archives.items())))
    return Job(
        manifests=[manifest for manifest in manifests if manifest not in carried],
        read=read_config,
        plan=plan._replace(carried=tuple(lines)),
        write=write,
        dedup=options.dedup,
        max_file_bytes=options.max_file_bytes,
        published=previous.published() if refreshing else None,
        publish=functools.partial(commit_dataset, commit),
        carried=carried,
    )


def _carried(manifests: list[ManifestFile], lines: list[ArchiveLine]) -> tuple[ManifestFile, ...]:
    """The manifests of the archives `lines` carries, said on stderr (how many of the
    archives a refresh does not read)."""
    paths = {line.path for line in lines}
    carried = tuple(manifest for manifest in manifests if manifest.path in paths)
    if carried:
        archives = sum(manifest.kind == "archive" for manifest in manifests)
        print(
            f"tfrecord-pipeline: --incremental: {len(carried):,} of {archives:,} archives "
            "unchanged since the published version: carried unread",
            file=sys.stderr,
        )
    return carried
