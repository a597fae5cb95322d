"""transforms/plan/dedup.py: a row whose image bytes repeat an earlier row's is an error row;
the local runner's rows grouped by digest in buckets (transforms/local/plan.py)."""

import os

from conftest import manifest_row

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason
from tfrecord_pipeline.transforms.local import row_buckets
from tfrecord_pipeline.transforms.local.error_sink import ErrorSink
from tfrecord_pipeline.transforms.local.plan import drop_duplicate_content
from tfrecord_pipeline.transforms.local.row_buckets import RowBuckets
from tfrecord_pipeline.transforms.manifest.rows import row_position
from tfrecord_pipeline.transforms.plan.dedup import first_of_each, keep_first


def test_keep_first_rejects_later_copies_but_leaves_repeated_keys_to_the_writer():
    first = manifest_row("cat/a")  # at byte 2 of m.csv

    def later(key, offset):
        return manifest_row(key)._replace(position=row_position(0, offset))

    repeat, copy = later("cat/a", 5), later("cat/b", 3)
    kept = list(keep_first([copy, repeat, first]))
    assert [row for row in kept if not isinstance(row, ErrorRow)] == [first, repeat]
    assert [(e.key, e.reason, e.message) for e in kept if isinstance(e, ErrorRow)] == [
        ("cat/b", Reason.DUPLICATE_CONTENT, "same bytes as m.csv@2")
    ]


def test_the_first_of_each_digest_stays_whatever_bucket_its_rows_arrive_in():
    one, two, copy = manifest_row("cat/a"), manifest_row("cat/b"), manifest_row("cat/c")
    kept = list(first_of_each([("d2", two), ("d1", copy), ("d1", one)]))
    assert [row for row in kept if not isinstance(row, ErrorRow)] == [two, one]
    assert [error.key for error in kept if isinstance(error, ErrorRow)] == ["cat/c"]


def _deduplicated(rows: list, staging, held_rows: int) -> tuple[list[str], tuple, bool]:
    """drop_duplicate_content with `held_rows` held: the kept keys (sorted), the error rows'
    lines, and whether rows were spilled to disk."""
    errors = ErrorSink(str(staging))
    with RowBuckets(held_rows) as buckets:
        kept = drop_duplicate_content(iter(rows), len(rows), 1 << 20, errors, buckets)
        spilled = bool(os.listdir(buckets.folder()))
        keys = sorted(row.key for row in kept)
    return keys, sorted(errors.spilled().lines), spilled


def test_the_local_runner_groups_digests_in_buckets_spilled_to_disk(tmp_path, monkeypatch):
    """Rows bucketed by their digest's hash, a few rows a bucket and a few held: every bucket
    spilled, each grouped alone, the same rows and errors as with every row held."""
    images = []
    for index in range(8):  # eight distinct files, four with the same bytes as another
        images.append(tmp_path / f"{index}.jpg")
        images[-1].write_bytes(b"image %d" % (index % 4))
    rows = [manifest_row(f"cat/{n:02d}", uri=str(images[n % 8])) for n in range(40)]
    held = _deduplicated(rows, tmp_path, 10_000)
    monkeypatch.setattr(row_buckets, "GROUPED_ROWS", 5)
    spilled = _deduplicated(rows, tmp_path, 3)
    assert held[:2] == spilled[:2] and (held[2], spilled[2]) == (False, True)
    assert held[0] == ["cat/00", "cat/01", "cat/02", "cat/03"]  # the first of each of 4 bytes
    assert len(held[1]) == 36
