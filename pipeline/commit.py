"""Committing a dataset: metadata after every shard, the `_COMMITTED` marker after everything.

A reader that finds no marker must treat the folder as incomplete. Nothing here relies on a
rename being atomic (it is not on GCS): the marker is a new object written last, and it is
only written when the dataset passes its quality gates.
"""

import hashlib
import json
import os
from typing import NamedTuple

from pipeline.metadata import ERRORS_FILE, INFO_FILE, LABELS_FILE, DatasetInfo, build_info
from transforms import fileio
from transforms.errors import ErrorRow, UserError
from transforms.plan import DatasetPlan
from transforms.shard_writer import TMP_DIR, ShardResult
from transforms.sharding import is_shard_file_name

MARKER = "_COMMITTED"


def is_committed(output: str) -> bool:
    return fileio.exists(fileio.join(output, MARKER))


def prepare_output(output: str, overwrite: bool) -> None:
    """Stop on an output that cannot be written (a file, a folder under a file, no permission)
    before any work; refuse to replace a committed dataset unless asked, and when asked,
    un-commit it first."""
    try:
        fileio.check_writable_folder(output)
        committed = is_committed(output)
    except fileio.READ_ERRORS as error:
        raise UserError(f"--output {output}: cannot write there ({error})") from None
    if not committed:
        return
    if not overwrite:
        raise UserError(
            f"{output} already holds a committed dataset; pass --overwrite to replace it"
        )
    fileio.delete([fileio.join(output, MARKER)])


def read_info(output: str) -> DatasetInfo:
    return DatasetInfo.from_json(fileio.read_text(fileio.join(output, INFO_FILE)))


def _remove_leftovers(output: str, keep: set[str]) -> None:
    """Delete temp files and shards of an earlier conversion that this one did not write."""
    leftovers = fileio.glob(fileio.join(output, TMP_DIR, "*"))
    leftovers += [
        path
        for path in fileio.glob(fileio.join(output, "*.tfrecord*"))
        if is_shard_file_name(os.path.basename(path).removesuffix(".idx"))
        and os.path.basename(path) not in keep
    ]
    fileio.delete(leftovers)
    temp_dir = fileio.join(output, TMP_DIR)
    if not fileio.is_remote(output) and os.path.isdir(temp_dir):
        os.rmdir(temp_dir)


def write_dataset_files(output: str, info: DatasetInfo, labels_text: str, errors) -> None:
    """Errors, labels and metadata, then (if the dataset passed its gates) the marker."""
    shards = [shard for split in info.splits.values() for shard in split.shards]
    keep = {shard.file for shard in shards} | {shard.index for shard in shards}
    _remove_leftovers(output, keep)
    lines = sorted(errors, key=lambda error: error.sort_key())
    fileio.write_bytes(
        fileio.join(output, ERRORS_FILE), "".join(e.to_json() + "\n" for e in lines).encode()
    )
    fileio.write_bytes(fileio.join(output, LABELS_FILE), labels_text.encode("utf-8"))
    info_bytes = info.to_json().encode("utf-8")
    fileio.write_bytes(fileio.join(output, INFO_FILE), info_bytes)
    if not info.failures:
        marker = {INFO_FILE: hashlib.sha256(info_bytes).hexdigest()}
        fileio.write_bytes(fileio.join(output, MARKER), json.dumps(marker).encode())


class Commit(NamedTuple):
    """What committing needs besides the shards and errors: the same for every runner."""

    output: str
    options: dict  # ConvertOptions.recorded()
    tool_version: str
    max_error_rate: float


def commit_dataset(
    commit: Commit,
    plan: DatasetPlan,
    results: list[ShardResult],
    errors: list[ErrorRow],
    skipped: int,
) -> DatasetInfo:
    """Describe the dataset and write its files; runs once, after every shard exists."""
    info = build_info(
        plan, results, errors, skipped, commit.options, commit.tool_version, commit.max_error_rate
    )
    labels_text = "" if plan.labels.integers else plan.labels.to_text()
    write_dataset_files(commit.output, info, labels_text, errors)
    return info
