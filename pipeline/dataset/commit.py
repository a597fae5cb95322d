"""Committing a run: its shards moved into its version, the metadata written, then (if the
dataset passed its quality gates) the `_COMMITTED` marker, the version published, and what no
run can publish any more cleaned up.

The single commit step runs once, after every shard exists, from the results it received; the
same for every runner (pipeline/dataset/publish.py says why this makes published bytes immutable).
"""

import contextlib
from typing import NamedTuple

from tfrecord_pipeline.dataset import publish, versions
from tfrecord_pipeline.dataset.layout import delete_folder, unmake_layout
from tfrecord_pipeline.dataset.metadata import INFO_FILE, DatasetInfo, build_info
from tfrecord_pipeline.dataset.previous import base_lost
from tfrecord_pipeline.dataset.retention import clean_up
from tfrecord_pipeline.dataset.version_files import made_files
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.plan.carried import ARCHIVES_FILE, archive_lines, lines_text
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.rows_files import ROWS_SUFFIX
from tfrecord_pipeline.transforms.stages import PublishInputs
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write.error_files import ErrorCounts, ErrorFileResult
from tfrecord_pipeline.transforms.write.shard_writer import INDEX_SUFFIX, ShardResult


def read_info(folder: str) -> DatasetInfo:
    """A version's metadata, committed or not (a run stopped by its gates writes it too)."""
    return DatasetInfo.from_json(fileio.read_text(fileio.join(folder, INFO_FILE)))


def staged_files(
    results: list[ShardResult], error_files: list[ErrorFileResult]
) -> list[tuple[str, str]]:
    """(name in staging, name in the version) of every file the shard and errors-file results
    describe."""
    moves = [(error_file.staged, error_file.file) for error_file in error_files]
    for result in results:
        moves.append((result.staged, result.file))
        if result.index_file:
            moves.append((f"{result.staged}{INDEX_SUFFIX}", result.index_file))
        if result.rows_file:
            moves.append((f"{result.staged}{ROWS_SUFFIX}", result.rows_file))
    return moves


@contextlib.contextmanager
def cleaned_up_on_failure(target: publish.Target):
    """Around a run: when it fails, its own staging and version folders are deleted where the
    failure allows. If another run published meanwhile, that is the failure raised (not what
    followed from it, such as this run's base version deleted by that run's retention,
    pipeline/dataset/retention.py). Any other UserError comes before any work: nothing to
    delete but the layout the run made in a new or empty --output, which is left as it was.
    Whether another run published is asked even when the deletion
    fails (the store failing, say): the loss is the failure to tell."""
    try:
        yield
    except BaseException as error:
        if isinstance(error, UserError) and not base_lost(target):
            unmade(target)
            raise
        with contextlib.suppress(Exception):  # the failure may well stop it too
            publish.discard(target)
        other = None
        if isinstance(error, Exception):
            with contextlib.suppress(Exception):
                other = publish.published_since(target)
        if other and not isinstance(error, publish.SupersededError):
            raise publish.superseded(target, other.version) from error
        raise


def unmade(target: publish.Target) -> None:
    """After a mistake found before any work: the layout `target`'s run made in a new or empty
    --output undone, where nothing else has been written there (layout.py unmake_layout)."""
    with contextlib.suppress(Exception):  # the mistake is what to tell, not this
        unmake_layout(target.root, target.made)


@contextlib.contextmanager
def unmade_on_mistake(target: publish.Target):
    """Around a run's start-up on a remote runner (its job built and submitted): a UserError
    leaves a new or empty --output as it was."""
    try:
        yield
    except UserError:
        unmade(target)
        raise


def write_version_files(folder: str, info: DatasetInfo, names: list[str]) -> bytes:
    """The metadata and the files made from it and the label names (labels, TFDS's), each
    whole and on disk; returns the metadata's bytes."""
    info_bytes = info.to_json().encode("utf-8")
    for name, data in {**made_files(info, names), INFO_FILE: info_bytes}.items():
        fileio.write_durably(fileio.join(folder, name), data)
    return info_bytes


def write_archives_file(
    folder: str, plan: DatasetPlan, identities: dict[str, str], error_counts: ErrorCounts
) -> None:
    """The version's list of the archives it was made from, what a refresh carries them by
    (transforms/plan/carried.py); not checked: a refresh that cannot read it lists them."""
    lines = archive_lines(plan.archives, identities, dict(error_counts.files))
    fileio.write_durably(fileio.join(folder, ARCHIVES_FILE), lines_text(lines).encode("utf-8"))


class CommitConfig(NamedTuple):
    """How a run's version is committed, besides its results: where it goes, the options it
    records, its quality gate and how many versions stay; the same for every runner."""

    target: publish.Target
    options: dict  # ConvertOptions.recorded()
    tool_version: str
    max_error_rate: float
    keep_versions: int = 0  # complete versions kept after publishing; 0 keeps every one
    archives: tuple[tuple[str, str], ...] = ()  # (path, identity) of each archive read or carried


def commit_dataset(config: CommitConfig, inputs: PublishInputs) -> DatasetInfo:
    """Describe the run's version, move its shards and errors files in, and publish it if it
    passed its gates; runs once, after every shard and errors file exists. A retry of this
    step repeats it harmlessly."""
    plan, results, error_files, error_counts, skipped, negatives_dropped, refresh = inputs
    info = build_info(
        plan,
        results,
        error_counts,
        error_files,
        skipped,
        config.options,
        config.tool_version,
        config.max_error_rate,
        negatives_dropped,
        refresh,
    )
    target = config.target
    current, _ = publish.read_pointer(target.root)
    if current and current.version == target.version:  # a retry after this step published
        clean_up(target.root, current, config.keep_versions)
        return info
    publish.finalise(target, staged_files(results, error_files))
    info_bytes = write_version_files(target.folder, info, list(plan.labels.names))
    if plan.archives:
        write_archives_file(target.folder, plan, dict(config.archives), error_counts)
    delete_folder(target.root, versions.STAGING, target.version)
    if info.failures:
        return info
    fileio.write_durably(
        fileio.join(target.folder, versions.MARKER), versions.marker_bytes(info_bytes)
    )
    pointer = versions.Pointer(target.version, versions.metadata_digest(info_bytes))
    publish.publish(target, pointer)
    clean_up(target.root, pointer, config.keep_versions)
    return info
