"""The rows a version rejected, read back from its errors files: the first few, named when the
version was not published, so a user sees which files to fix or leave out without opening
`errors/`. Reads are bounded (a few rows from the start of the first files), whatever the
number of rejected rows."""

import io
import json
from collections.abc import Iterator

from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write.error_files import ERRORS_DIR

NAMED_ROWS = 3  # rejected rows a not-published run names
_READ_BYTES = 1 << 16


def error_rows(folder: str, info: DatasetInfo) -> Iterator[dict]:
    """The version's error rows, file by file in the order the metadata lists them (each file
    sorted by source and key), read lazily: a caller that stops early reads little."""
    for error_file in info.error_files:
        path = fileio.join(folder, error_file.file)
        with io.BufferedReader(fileio.open_bytes(path, _READ_BYTES), _READ_BYTES) as stream:
            for line in stream:
                yield json.loads(line)


def named(row: dict) -> str:
    """What a rejected row is called: its key (the image's path as the manifest wrote it, or
    as the tree holds it), whole; quoted only if it holds a character a line cannot show."""
    key = row["key"]
    return key if key.isprintable() else repr(key)


def first_rejected(info: DatasetInfo, folder: str) -> str | None:
    """A line naming the first NAMED_ROWS rejected rows and their reasons, for a version that
    was not published; None for a published one or one without rejected rows."""
    if not info.failures or not info.errors:
        return None
    rows = []
    for row in error_rows(folder, info):
        rows.append(f"{named(row)} ({row['reason']}: {row['message']})")
        if len(rows) == NAMED_ROWS:
            break
    more = f" and {info.errors - len(rows):,} more" if info.errors > len(rows) else ""
    return (
        f"tfrecord-pipeline: rejected: {'; '.join(rows)}{more}; every one in "
        f"{fileio.join(folder, ERRORS_DIR)}/"
    )
