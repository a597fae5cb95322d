"""A row's fingerprint: how a refresh knows a row again (transforms/plan/refresh.py).

A digest of everything its record is made from (split, label, extra features, a detection row's
objects, image path) and of the image file's identity, its size and modification time (an
object's size and CRC-32C, from its folder's listing or its metadata:
transforms/storage/listings.py), taken with one stat and no read. The alternative, a hash of a
local image's bytes, would read every image every night, which is most of what a conversion
costs; the price of the stat is that a rewrite keeping both size and time goes unseen (`touch`
the file, or run without `--incremental`, to convert it again).
"""

import hashlib

from tfrecord_pipeline.transforms.errors import RowError
from tfrecord_pipeline.transforms.image.files import image_identity
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.storage import fileio, gcs, listings, retry


def fingerprint(row: ManifestRow, identity: str) -> str:
    """The fingerprint of `row` with its image file's `identity` (fileio.identity); "" (which
    matches nothing) without one. Its parts are joined by NUL, which none of them can hold
    (paths and labels with one are errors)."""
    if not identity:
        return ""
    features = repr(row.features) if row.features else ""
    if row.objects is not None:  # a detection row: its annotations make its record too
        features += repr(row.objects)
    made_of = f"{row.split}\0{row.label}\0{features}\0{row.image_uri}\0{identity}"
    return hashlib.blake2b(made_of.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def row_fingerprint(row: ManifestRow) -> str:
    """The row's fingerprint; "" (matching nothing: the row is converted, which says why the
    image cannot be had) when its image cannot be looked at. A stat the store keeps failing
    for every request is a fault (transforms/image/files.py `read_image`)."""
    try:
        return fingerprint(row, image_identity(row.image_uri, row.member))
    except retry.StoreUnavailableError:
        if not gcs.store_answers(row.image_uri):
            raise
        return ""
    except (RowError, *fileio.READ_ERRORS):
        return ""


def row_fingerprints(rows: list[ManifestRow], map_=map) -> list[str]:
    """Every row's fingerprint (`row_fingerprint`), a `gs://` image's identity taken from its
    folder's listing where that pays (transforms/storage/listings.py), else from a stat of its
    own; `map_` (a thread pool's) runs the listings and the stats where they are requests, on
    a store. Local stats are made here, one after another."""
    if not (rows and fileio.is_remote(rows[0].image_uri)):
        return list(map(row_fingerprint, rows))
    listed = listings.listed_identities((r.image_uri for r in rows if r.member is None), map_)
    by_stat = iter(map_(row_fingerprint, [row for row in rows if row.image_uri not in listed]))
    return [
        fingerprint(row, listed[row.image_uri]) if row.image_uri in listed else next(by_stat)
        for row in rows
    ]
