"""`--dedup`: rows whose image bytes repeat an earlier row's become `duplicate_content` errors.

Rows are grouped by a digest of their file; in each group the first row (manifest order) stays.
Only digests and rows are grouped, never image bytes: on Beam by a shuffle, on the local runner
in buckets by a hash of the digest, each grouped alone (`first_of_each`).
"""

import hashlib
import itertools
from collections.abc import Iterable, Iterator

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, RowError
from tfrecord_pipeline.transforms.image.files import read_image
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, error_row


def content_digest(row: ManifestRow, max_file_bytes: int) -> str:
    """SHA-256 of the row's image file, read as the shard writer reads it (regular files only,
    none over the limit). A file that cannot be read gets a digest of its own, so it passes on
    to the shard writer, which reports why."""
    try:
        return hashlib.sha256(read_image(row.image_uri, max_file_bytes, row.member)[0]).hexdigest()
    except RowError:
        return f"unreadable:{row.key}"


def keep_first(rows: list[ManifestRow]) -> Iterator[ManifestRow | ErrorRow]:
    """Of rows with the same bytes, the first stays; the others become errors, except repeats of
    the first row's own key, which stay for the shard writer to report as `duplicate_key`.
    One at a time: a group can be every row of a manifest."""
    ordered = sorted(rows, key=lambda row: row.key)
    ordered.sort(key=lambda row: row.position)  # stable: by (position, key), no tuple a row
    first = ordered[0]
    yield first
    message = f"same bytes as {first.source}"
    for row in itertools.islice(ordered, 1, None):
        yield row if row.key == first.key else error_row(row, Reason.DUPLICATE_CONTENT, message)


def first_of_each(digested: Iterable[tuple[str, ManifestRow]]) -> Iterator[ManifestRow | ErrorRow]:
    """`keep_first` of every group of (digest, row) pairs with one digest: those of a bucket
    that holds every row of its digests, so that no bucket needs another's rows."""
    groups: dict[str, list[ManifestRow]] = {}
    for digest, row in digested:
        groups.setdefault(digest, []).append(row)
    for group in groups.values():
        yield from keep_first(group)
