"""Committing a dataset: metadata after every shard, the `_COMMITTED` marker after everything.

A reader that finds no marker must treat the folder as incomplete. Nothing here relies on a
rename being atomic (it is not on GCS): the marker is a new object written last, and it is
only written when the dataset passes its quality gates.
"""

import contextlib
import hashlib
import json
import os
from typing import NamedTuple

from pipeline.metadata import ERRORS_FILE, INFO_FILE, LABELS_FILE, DatasetInfo, build_info
from pipeline.tfds_metadata import tfds_files
from transforms import fileio
from transforms.errors import ErrorRow, FaultError, UserError
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
    except fileio.UNAVAILABLE:
        raise  # the service's failure, not the output's: a fault
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


def remove_temp_files(output: str) -> None:
    """Delete the shard writers' temporary files (`_tmp/`), and on a local disk the folder."""
    temp_dir = fileio.join(output, TMP_DIR)
    fileio.delete(fileio.glob(fileio.join(temp_dir, "*")))
    if not fileio.is_remote(output) and os.path.isdir(temp_dir):
        os.rmdir(temp_dir)


def _remove_leftovers(output: str, keep: set[str]) -> None:
    """Delete temp files and shards of an earlier conversion that this one did not write."""
    remove_temp_files(output)
    fileio.delete(
        [
            path
            for path in fileio.glob(fileio.join(output, "*.tfrecord*"))
            if is_shard_file_name(os.path.basename(path).removesuffix(".idx"))
            and os.path.basename(path) not in keep
        ]
    )


def _marker(output: str) -> bytes | None:
    """The `_COMMITTED` marker's bytes; None when the output is not committed."""
    path = fileio.join(output, MARKER)
    return fileio.read_bytes(path) if fileio.exists(path) else None


def _taken(output: str) -> FaultError:
    return FaultError(
        f"another run committed {output} while this one ran, and this run committed nothing; "
        f"check that dataset (tfrecord-pipeline verify {output}) or rerun with --overwrite"
    )


@contextlib.contextmanager
def cleaned_up_on_failure(output: str):
    """Around a conversion into `output`: when it fails, its temporary files are removed where
    the failure allows; if another run committed `output` meanwhile, that is the failure
    raised (a FaultError), not what followed from it (this run's temporary files deleted by
    the other run's commit). A UserError comes before any work: nothing to remove."""
    before = _marker(output)
    try:
        yield
    except UserError:
        raise
    except BaseException as error:
        taken = False
        with contextlib.suppress(Exception):  # the failure may well stop these too
            remove_temp_files(output)
            taken = isinstance(error, Exception) and _marker(output) not in (None, before)
        if taken:
            raise _taken(output) from error
        raise


def write_dataset_files(output: str, info: DatasetInfo, labels_text: str, errors) -> None:
    """Errors, labels and metadata, then (if the dataset passed its gates) the marker; nothing
    at all when another run committed the output since this one started."""
    info_bytes = info.to_json().encode("utf-8")
    marker = json.dumps({INFO_FILE: hashlib.sha256(info_bytes).hexdigest()}).encode()
    if _marker(output) not in (None, marker):  # the same marker: a retry of this very commit
        raise _taken(output)
    shards = [shard for split in info.splits.values() for shard in split.shards]
    keep = {shard.file for shard in shards} | {shard.index for shard in shards}
    _remove_leftovers(output, keep)
    lines = sorted(errors, key=lambda error: error.sort_key())
    fileio.write_bytes(
        fileio.join(output, ERRORS_FILE), "".join(e.to_json() + "\n" for e in lines).encode()
    )
    fileio.write_bytes(fileio.join(output, LABELS_FILE), labels_text.encode("utf-8"))
    for name, data in tfds_files(info).items():
        fileio.write_bytes(fileio.join(output, name), data)
    fileio.write_bytes(fileio.join(output, INFO_FILE), info_bytes)
    if not info.failures:
        fileio.write_bytes(fileio.join(output, MARKER), marker)


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
