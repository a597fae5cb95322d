"""A line when a run published a version holding what the version published before it held:
the same records, labels and errors, as the metadata's shard and errors-file CRCs, label digest
and recorded options say. Such a run still publishes (every run that passes its gates does, so
a scheduler's view of a run stays one of the statuses docs/guarantees.md lists), but a user
asking whether anything changed, or a nightly refresh keeping K versions, is told so.
"""

import dataclasses

from tfrecord_pipeline.dataset import history
from tfrecord_pipeline.dataset.commit import read_info
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.dataset.run_keys import DAMAGED
from tfrecord_pipeline.dataset.versions import VERSIONS
from tfrecord_pipeline.transforms.storage import fileio


def content(info: DatasetInfo) -> DatasetInfo:
    """`info` without what describes the run rather than the version's files: its key, the
    refresh's counts and the tool's release."""
    options = {name: value for name, value in info.options.items() if name != "run_key"}
    return dataclasses.replace(info, options=options, refresh=None, tool_version="")


def unchanged_line(info: DatasetInfo, folder: str) -> str | None:
    """The line for the published version in `folder` (of metadata `info`) when it holds what
    the version published before it holds; None otherwise, and when that one's metadata cannot
    be read."""
    if info.failures:
        return None
    root, version = fileio.dirname(fileio.dirname(folder)), folder.rstrip("/").rsplit("/", 1)[-1]
    order = history.newest_first(history.read_records(root))
    if version not in order[:-1]:
        return None
    before = order[order.index(version) + 1]
    try:  # damaged by hand or by the disk: pipeline/dataset/run_keys.py DAMAGED
        if content(read_info(fileio.join(root, VERSIONS, before))) != content(info):
            return None
    except (*DAMAGED, *fileio.READ_ERRORS):
        return None
    return (
        f"tfrecord-pipeline: note: {version} holds the same records, labels and errors as "
        f"{before}, published before it: nothing in the input or the options shaping it changed"
    )
