"""The clean-up after a publication: what no run can publish any more, leftovers of runs that
are gone, and with `--keep_versions K` the published versions beyond the K most recently
published.

A run numbered up to the highest recorded version started before that version was published,
so it can no longer publish (pipeline/dataset/publish.py). Once it is gone (its claim let go
of or expired: pipeline/dataset/claims.py), its staging folder, and its version folder unless
the version was published once (pipeline/dataset/history.py), are deleted. A run still alive
keeps its folders: it learns of its loss at its own publication (exit 4, naming the version
that was published) and deletes them itself. A complete version published once is deleted only
by retention, which counts versions in publication order (a rollback publishes an old version
anew), never by their numbers.

All of it is done under the root's lock or lease (pipeline/dataset/publish.py `exclusive`), so
no rollback publishes a version while it is being deleted, and each deletion is made only while
the lease is held (`check`).
"""

import contextlib
from collections.abc import Callable

from tfrecord_pipeline.dataset import claims, history
from tfrecord_pipeline.dataset.layout import delete_folder, delete_version, folders_in
from tfrecord_pipeline.dataset.publish import exclusive, read_pointer
from tfrecord_pipeline.dataset.versions import STAGING, VERSIONS, Pointer, is_complete, sequence


def clean_up(root: str, published: Pointer, keep_versions: int) -> None:
    """After `published` was published: delete what no run can publish any more, and with
    `keep_versions`, the published versions beyond the K most recently published (the
    published one among them). Left to a later publication's clean-up if one happened since;
    locally under the lock, so no rollback publishes a version while it is being deleted."""
    with exclusive(root) as check:
        if read_pointer(root)[0] != published:
            return
        records = history.read_records(root)
        once = {record.version for record in records}
        last = max(map(sequence, [published.version, *once]))
        for version, unpublished in _leftovers(root, last, once, published.version):
            check()
            _tidy(delete_folder, root, STAGING, version)
            if unpublished:
                _tidy(delete_version, root, version)
            _tidy(claims.drop, root, version)
        if keep_versions:
            _retain(root, records, published, keep_versions, check)


def _leftovers(root: str, last: int, once: set[str], published: str) -> list[tuple[str, bool]]:
    """The versions numbered up to `last` whose runs are gone and left a staging folder, a
    claim, or a version folder never published (or not complete); each with whether its
    version folder is to go too."""
    staged = {claims.claimed_version(name) or name for name in folders_in(root, STAGING)}
    unpublished = {
        name
        for name in folders_in(root, VERSIONS)
        if name != published and (name not in once or not is_complete(root, name))
    }
    numbered = sorted(name for name in staged | unpublished if 0 < sequence(name) <= last)
    live = {version for version in numbered if claims.is_live(root, version)}
    return [(version, version in unpublished) for version in numbered if version not in live]


def _retain(
    root: str, records: list, published: Pointer, keep_versions: int, check: Callable
) -> None:
    """Delete the recorded versions beyond the `keep_versions` most recently published, and
    their records; the published one is always kept."""
    order = [name for name in history.newest_first(records) if name != published.version]
    present = [name for name in order if is_complete(root, name)]
    beyond = present[keep_versions - 1 :]
    gone = {name for name in order if name not in present}
    for name in beyond:
        check()
        _tidy(delete_version, root, name)
    _tidy(history.erase, root, {*beyond, *gone})


def _tidy(delete: Callable[..., None], *args) -> None:
    """One deletion of the clean-up, which may fail: the version is published by then, and
    another run deleting its own folder, or still writing in it, can make the deletion fail
    (a file gone or added under it): what is left, a later run's clean-up deletes."""
    with contextlib.suppress(OSError):
        delete(*args)
