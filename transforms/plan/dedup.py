"""`--dedup`: rows whose image bytes repeat an earlier row's become `duplicate_content` errors.

Rows are grouped by a digest of their file; in each group the first row (manifest order) stays.
Only digests and rows are grouped, never image bytes.
"""

import hashlib
import itertools
from collections.abc import Iterator

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, RowError
from tfrecord_pipeline.transforms.image.files import read_image
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, error_row


def content_digest(row: ManifestRow, max_file_bytes: int) -> str:
    """SHA-256 of the row's image file, read as the shard writer reads it (regular files only,
    none over the limit). A file that cannot be read gets a digest of its own, so it passes on
    to the shard writer, which reports why."""
    try:
        return hashlib.sha256(read_image(row.image_uri, max_file_bytes)[0]).hexdigest()
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
