"""A version's label names, from its folder: every reader of them (refresh, TFDS's files,
verify, rollback, stats) asks here.

The names are in the version's `labels.txt`, one a line in id order; its metadata describes
them by their count and the file's sha256, which the commit marker covers with the rest of the
metadata, so a `labels.txt` changed since is refused. A version whose metadata lists the names
itself (`labels.names`: format 1, and integer ids in any format) is read from that list.
"""

import hashlib

from tfrecord_pipeline.dataset.metadata import INFO_FILE, LABELS_FILE, DatasetInfo
from tfrecord_pipeline.dataset.versions import DatasetError
from tfrecord_pipeline.transforms.storage import fileio


def labels_file_names(folder: str, labels: dict) -> tuple[list[str], str]:
    """(names, "") from the `labels.txt` in `folder`, or ([], what is wrong with it): missing,
    unreadable, or not the count and sha256 the metadata's `labels` say."""
    try:
        data = fileio.read_bytes(fileio.join(folder, LABELS_FILE))
    except fileio.MISSING:
        return [], "missing"
    except fileio.READ_ERRORS as error:
        return [], f"cannot be read ({error})"
    if hashlib.sha256(data).hexdigest() != labels["sha256"]:
        return [], f"differs from what {INFO_FILE} describes"
    # The digest matched: the bytes are the commit's, a UTF-8 name a line (no name holds a
    # line break, transforms/manifest/labels.py CONTROL).
    names = data.decode("utf-8").splitlines()
    if len(names) != labels["count"]:
        return [], f"{len(names)} names, {INFO_FILE} says {labels['count']}"
    return names, ""


def label_names(folder: str, info: DatasetInfo) -> list[str]:
    """The label names (integer ids, when labels are integers) of the version in `folder`,
    whose metadata is `info`, in id order; DatasetError (one line) when its `labels.txt` is
    not the one its metadata describes."""
    if "names" in info.labels:
        return list(info.labels["names"])
    names, problem = labels_file_names(folder, info.labels)
    if problem:
        path = fileio.join(folder, LABELS_FILE)
        raise DatasetError(f"{path}: {problem}; run verify on {folder}")
    return names
