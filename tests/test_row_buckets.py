"""transforms/local/row_buckets.py: the rows held are a budget of bytes, so a run's memory does
not depend on how heavy its rows are (spilling and reading back: tests/test_local.py)."""

import os
import tarfile
import tempfile
import tracemalloc

from conftest import manifest_row, read_manifest, write_manifest

from tfrecord_pipeline.transforms.local import row_buckets
from tfrecord_pipeline.transforms.local.row_buckets import RowBuckets, footprint
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow

NAMES = [f"cat/{number:05d}.jpg" for number in range(300)]


def _rows(path) -> list[ManifestRow]:
    return [row for row in read_manifest(path) if isinstance(row, ManifestRow)]


def _loose_and_member_rows(tmp_path) -> tuple[list[ManifestRow], list[ManifestRow]]:
    """The same 300 images' rows, as a CSV lists them and as one tar holds them."""
    csv = write_manifest(tmp_path / "m.csv", [{"image_uri": n, "label": "cat"} for n in NAMES])
    with tarfile.open(tmp_path / "images.tar", "w") as tar:
        for name in NAMES:
            tar.addfile(tarfile.TarInfo(name))  # listed, never read
    return _rows(csv), _rows(tmp_path / "images.tar")


def _spills(rows: list[ManifestRow], tmp_path) -> bool:
    with RowBuckets() as buckets:
        for row in rows:
            buckets.add("read", row)
        spilled = list(tmp_path.glob("tfrecord-pipeline-rows-*"))
        assert [*buckets.take("read")] == rows
    return bool(spilled)


def test_an_archives_rows_weigh_more_and_fewer_of_them_are_held(tmp_path, monkeypatch):
    """A member's row carries where its bytes are: twice a loose file's row. Held by count,
    25,000 rows of a tar held twice the memory of a CSV's (issue 43)."""
    loose, members = _loose_and_member_rows(tmp_path)
    assert footprint(members[150]) > 1.5 * footprint(loose[150])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # $TMPDIR, as read once
    monkeypatch.setattr(row_buckets, "HELD_BYTES", len(NAMES) * footprint(loose[150]) * 1.2)
    assert not _spills(loose, tmp_path)
    assert _spills(members, tmp_path)


def test_a_rows_footprint_counts_what_it_shares_with_other_rows_once_not_a_row():
    label = "".join(["tabby ", "cat"] * 20)  # made at run time: not an interned constant
    shared = [ManifestRow(f"k{n}", f"k{n}.jpg", label, "train", (), "m.csv", n) for n in range(2)]
    alone = shared[0]._replace(label="".join(["tabby ", "cat"] * 20))
    assert footprint(alone) > footprint(shared[0]) + len(label)


def test_a_spill_read_back_holds_a_few_of_its_rows_at_a_time_not_all():
    """Pickled at once, a spill of 20,000 rows was unpickled at once by whoever read its
    first row (a shard writer process, or one sorting it into pieces)."""
    rows = [manifest_row(f"cat/{number}.jpg") for number in range(20_001)]
    with RowBuckets(held_rows=20_000) as buckets:
        for row in rows:
            buckets.add("read", row)
        taken = iter(buckets.take("read"))
        tracemalloc.start()
        try:
            assert next(taken) == rows[0]
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20  # the 20,000 rows: ~5 MB
        assert [rows[0], *taken] == rows


def _taken(buckets: RowBuckets, keep: bool) -> tuple[list[ManifestRow], object, list[str]]:
    """50 rows added to a bucket that holds 20, taken: the rows, what was taken, its files."""
    rows = [manifest_row(f"cat/{number}.jpg") for number in range(50)]
    for row in rows:
        buckets.add("shard", row)
    taken = buckets.take("shard", keep=keep)
    return rows, taken, [path for path, _ in taken._batches if path]


def test_rows_taken_to_keep_are_read_as_often_as_asked_until_released():
    """A shard task's rows: its writer and one that takes over the end of its shard both read
    them (transforms/local/tail.py), so their spilled files stay until released."""
    with RowBuckets(held_rows=20) as buckets:
        rows, taken, files = _taken(buckets, keep=True)
        assert files
        assert [*taken] == [*taken] == rows
        row_buckets.release((taken,))  # a shard's runs
        assert not any(map(os.path.exists, files))


def test_rows_taken_once_lose_their_files_as_they_are_read():
    with RowBuckets(held_rows=20) as buckets:
        rows, taken, files = _taken(buckets, keep=False)
        assert [*taken] == rows
        assert files and not any(map(os.path.exists, files))
