"""The clean-up after a publication: what no run can publish any more, leftovers of killed runs,
and with `--keep_versions K` the published versions beyond the K most recently published.

A run numbered up to the highest recorded version started before that version was published,
so it can no longer publish (pipeline/dataset/publish.py): its staging folder, and its version
folder unless the version was published once (pipeline/dataset/history.py), are deleted. A
complete version published once is deleted only by retention, which counts versions in
publication order (a rollback publishes an old version anew), never by their numbers.

Such a run may still be running, moving its files in: its folders are deleted all the same.
No store tells a live run from a dead one (a bucket holds no lock a dead run lets go of), and
sparing every folder that might be live would leave a killed run's for ever. The live run
fails at its next move or write, and that failure is told as what it is, the loss to the
version published since, in one line (exit 4: pipeline/dataset/commit.py
`cleaned_up_on_failure`); its own deletion of its folders may race this one, and each lets
files vanish under it (fileio.delete_tree), so between them nothing is left.
"""

import contextlib
from collections.abc import Callable

from tfrecord_pipeline.dataset import history
from tfrecord_pipeline.dataset.layout import delete_folder, delete_version, folders_in
from tfrecord_pipeline.dataset.publish import exclusive, read_pointer
from tfrecord_pipeline.dataset.versions import STAGING, VERSIONS, Pointer, is_complete, sequence


def clean_up(root: str, published: Pointer, keep_versions: int) -> None:
    """After `published` was published: delete what no run can publish any more, and with
    `keep_versions`, the published versions beyond the K most recently published (the
    published one among them). Left to a later publication's clean-up if one happened since;
    locally under the lock, so no rollback publishes a version while it is being deleted."""
    with exclusive(root):
        if read_pointer(root)[0] != published:
            return
        records = history.read_records(root)
        once = {record.version for record in records}
        last = max(map(sequence, [published.version, *once]))
        for name in folders_in(root, STAGING):
            if 0 < sequence(name) <= last:
                _tidy(delete_folder, root, STAGING, name)
        for name in folders_in(root, VERSIONS):
            if name == published.version or not 0 < sequence(name) <= last:
                continue
            if name not in once or not is_complete(root, name):
                _tidy(delete_version, root, name)
        if keep_versions:
            _retain(root, records, published, keep_versions)


def _retain(root: str, records: list, published: Pointer, keep_versions: int) -> None:
    """Delete the recorded versions beyond the `keep_versions` most recently published, and
    their records; the published one is always kept."""
    order = [name for name in history.newest_first(records) if name != published.version]
    present = [name for name in order if is_complete(root, name)]
    beyond = present[keep_versions - 1 :]
    gone = {name for name in order if name not in present}
    for name in beyond:
        _tidy(delete_version, root, name)
    _tidy(history.erase, root, {*beyond, *gone})


def _tidy(delete: Callable[..., None], *args) -> None:
    """One deletion of the clean-up, which may fail: the version is published by then, and
    another run deleting its own folder, or still writing in it, can make the deletion fail
    (a file gone or added under it): what is left, a later run's clean-up deletes."""
    with contextlib.suppress(OSError):
        delete(*args)
