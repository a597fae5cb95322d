"""A member a manifest names (`archive.tar#member`), found in its archive.

Rows listed from an archive carry where their member is; a CSV row naming one does not, so
its archive is listed once per process and the listing kept for the rows that follow, a few
archives at a time (a shard's rows come in hash order, from every archive at once, but a
manifest that mixes members of many archives is rare beside one that lists one archive's).
"""

import functools

from tfrecord_pipeline.transforms.archive.kinds import read_entries
from tfrecord_pipeline.transforms.archive.members import (
    Entry,
    Member,
    listed_identity,
    split_member_uri,
)
from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.storage import fileio

ARCHIVES_HELD = 4


def is_member_uri(uri: str) -> bool:
    """Whether `uri` names an archive member, not a loose file whose name holds `#`."""
    return split_member_uri(uri) is not None and not fileio.exists(uri)


def locate(uri: str) -> Member:
    """Where the member `uri` names is; RowError when its archive or the member is missing."""
    archive, held_as = split_member_uri(uri)
    try:
        listed = _listing(archive, fileio.identity(archive))
    except fileio.MISSING:
        raise RowError(Reason.MISSING_FILE, f"no such archive: {archive}") from None
    found = listed.get(held_as)
    if found is None:
        raise RowError(Reason.MISSING_FILE, f"{archive} holds no member {held_as!r}")
    if not isinstance(found, Member):
        raise RowError(found[0], f"{uri}: {found[1]}")
    return found


@functools.lru_cache(maxsize=ARCHIVES_HELD)
def _listing(archive: str, identity: str) -> dict[str, Member | tuple]:
    """Every member of `archive` (as it is while its identity is `identity`) by the name the
    archive holds it as; a refused member as its (reason, message)."""
    listed = listed_identity(archive)
    return {
        item.held_as: item.member._replace(listed=listed)
        if isinstance(item, Entry)
        else (item.reason, item.message)
        for item in read_entries(archive)
        if item.held_as
    }
