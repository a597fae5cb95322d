"""transforms/write/shard_writer.py: one shard's rows written to the attempt's own staged file,
in record order, the first of repeated keys kept, every row it cannot store an error row with
its reason; the pool's results in order, a window at a time."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import encode, manifest_row, photo

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, row_position
from tfrecord_pipeline.transforms.plan.sharding import ShardId, piece_of, record_order
from tfrecord_pipeline.transforms.write.in_flight import ordered_map
from tfrecord_pipeline.transforms.write.shard_writer import (
    SortedRuns,
    WriteConfig,
    ordered_unique,
    write_shard,
)


@pytest.mark.slow
def test_write_shard_keeps_first_duplicate_and_reports_bad_images(tmp_path):
    good = tmp_path / "good.jpg"
    good.write_bytes(encode(photo().resize((32, 32))))
    (tmp_path / "bad.jpg").write_bytes(encode(photo().resize((32, 32)))[:-100])

    def row(key, name, offset):
        return ManifestRow(
            key, str(tmp_path / name), "cat", "train", (), "m", row_position(0, offset)
        )

    rows = [row("k1", "good.jpg", 30), row("k1", "good.jpg", 20), row("k2", "bad.jpg", 40)]
    rows.append(row("k3", "missing.jpg", 50))
    out = list(
        write_shard(ShardId("train", 0, 1), rows, LabelMap(("cat",)), WriteConfig(str(tmp_path)))
    )
    result, errors = out[-1], out[:-1]
    assert result.records == 1 and result.label_counts == ((0, 1),)
    assert sorted((e.key, e.reason.value, e.source) for e in errors) == [
        ("k1", "duplicate_key", "m@30"),
        ("k2", "corrupt_image", "m@40"),
        ("k3", "missing_file", "m@50"),
    ]
    # The attempt's own file in the staging folder, under a name no other attempt uses.
    assert result.staged.startswith(f"{result.file}.") and result.staged != result.file
    staged = sorted(p.name for p in tmp_path.glob(f"{result.file}*"))
    assert staged == [result.staged, f"{result.staged}.rows"]
    assert (tmp_path / result.staged).stat().st_size == result.bytes


def test_rows_come_in_record_order_and_a_key_seen_earlier_in_the_manifests_is_an_error():
    keys = [f"k{number}" for number in range(20)]
    rows = [
        manifest_row(key)._replace(position=row_position(0, 10 + n)) for n, key in enumerate(keys)
    ]
    again = rows[5]._replace(position=row_position(0, 1))  # the same key, earlier in the file
    out = list(ordered_unique([*reversed(rows), again], 1))
    kept = [row for row in out if isinstance(row, ManifestRow)]
    assert [row.key for row in kept] == sorted(keys, key=record_order)
    assert kept[[row.key for row in kept].index("k5")] == again
    (error,) = [row for row in out if isinstance(row, ErrorRow)]
    assert (error.key, error.reason, error.source) == ("k5", Reason.DUPLICATE_KEY, "m.csv@15")
    assert error.message == "key also used at m.csv@1"


def test_a_shard_written_in_runs_is_the_shard_written_whole_byte_for_byte(tmp_path):
    """Each run a contiguous range of record order, sorted alone (the local runner's way of
    holding a run's rows at a time): the same file as all its rows sorted at once."""
    image = tmp_path / "cat.jpg"
    image.write_bytes(encode(photo().resize((16, 16))))
    rows = [
        ManifestRow(f"k{n}", str(image), "cat", "train", (), "m", row_position(0, n))
        for n in range(60)
    ]
    runs = SortedRuns([row for row in rows if piece_of(row.key, 3) == run] for run in range(3))
    files = []
    for given in (rows, runs):
        config = WriteConfig(str(tmp_path))
        *_, result = write_shard(ShardId("train", 0, 1), given, LabelMap(("cat",)), config)
        files.append((tmp_path / result.staged).read_bytes())
        assert result.records == 60
    assert files[0] == files[1]
    assert all(len(run) > 5 for run in runs)


class _CountingPool(ThreadPoolExecutor):
    submitted = 0

    def submit(self, *args):
        self.submitted += 1
        return super().submit(*args)


@pytest.mark.parametrize("window", [1, 3])
def test_a_pool_s_results_come_in_input_order_with_at_most_a_window_in_flight(window):
    with _CountingPool(4) as pool:
        for done, result in enumerate(ordered_map(pool, lambda n: n * n, range(10), window)):
            assert result == done * done and pool.submitted <= done + window
    assert pool.submitted == 10
    assert list(ordered_map(None, lambda n: n * n, range(3), window)) == [0, 1, 4]
