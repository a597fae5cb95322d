"""transforms/local/manifests.py: large manifests read in byte ranges on the local runner's
processes give the rows, counts and error rows of a whole read."""

import json

import pyarrow as pa
import pyarrow.parquet as pq

from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.local import manifests as local_manifests
from tfrecord_pipeline.transforms.local.error_sink import ErrorSink
from tfrecord_pipeline.transforms.local.manifests import gather, read_on, split_reads
from tfrecord_pipeline.transforms.local.pool import ShardPool
from tfrecord_pipeline.transforms.local.row_buckets import RowBuckets
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig
from tfrecord_pipeline.transforms.manifest.sources import ManifestFile, check_manifests, read_all
from tfrecord_pipeline.transforms.plan.dataset import PlanAccumulator


def _manifests(folder) -> list[str]:
    """A CSV, a JSONL and a Parquet manifest (row groups of 7), each with some bad rows."""
    csv_lines = ["image_uri,label", *(f"{i}.jpg,{i % 3}" for i in range(300)), "only.jpg", ""]
    (folder / "m.csv").write_text("\n".join(csv_lines))
    jsonl = [json.dumps({"image_uri": f"{i}.jpg", "label": i % 3}) for i in range(200)]
    (folder / "m.jsonl").write_text("\n".join([*jsonl, "{not json", '{"label": "x"}']))
    urls, labels = [f"p{i}.jpg" for i in range(100)], [i % 4 for i in range(100)]
    table = pa.table({"url": urls, "label": labels})
    pq.write_table(table, folder / "m.parquet", row_group_size=7)
    return [str(folder / name) for name in ("m.csv", "m.jsonl", "m.parquet")]


def _read(manifests, config, staging, pool=None):
    """(rows by position, plan stats, error tally) of the manifests, read as the runner does."""
    here, there = split_reads(manifests, 2) if pool else (manifests, [])
    counted, errors = PlanAccumulator(), ErrorSink(staging)
    with RowBuckets() as buckets:
        reads = read_on(pool, there, config, PlanAccumulator, buckets, "read", staging)
        for manifest in here:
            for item in errors.passed(read_all(manifest, config)):
                counted.add(item)
                buckets.add("read", item)
        gather(reads, counted, buckets, errors)
        rows = sorted(buckets.take("read"), key=lambda row: row.position)
    return rows, counted.stats(), errors.finish(1000)[1]


def test_large_manifests_read_in_ranges_on_the_pool_give_what_a_whole_read_gives(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(local_manifests, "READ_RANGE_BYTES", 64)
    config = ReadConfig()
    manifests = check_manifests(_manifests(tmp_path), config)
    whole = [item for manifest in manifests for item in read_all(manifest, config)]
    assert any(isinstance(item, ErrorRow) for item in whole)
    _, there = split_reads(manifests, 2)
    assert len(there) == 2 * len(manifests)  # one range here, one on each process
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with ShardPool(2, ImageConfig()) as pool:
        in_ranges = _read(manifests, config, str(tmp_path / "a"), pool)
    assert in_ranges == _read(manifests, config, str(tmp_path / "b"))
    assert len(in_ranges[0]) == sum(isinstance(item, ManifestRow) for item in whole)


def _archives(folder, sizes: list[int]) -> list[ManifestFile]:
    return [ManifestFile(n, f"{folder}/{n}.tar", "archive", size=s) for n, s in enumerate(sizes)]


def test_neighbouring_archives_are_read_in_a_few_groups_a_process_of_equal_bytes(tmp_path):
    """Local archives on two processes: ARCHIVE_GROUPS groups each, in their order, every
    archive once; a large one alone."""
    archives = _archives(tmp_path, [100] * 10)
    _, there = split_reads(archives, 2)
    groups = [manifests for manifests, _, _ in there]
    assert len(groups) == 2 * local_manifests.ARCHIVE_GROUPS
    assert [archive for group in groups for archive in group] == archives
    archives = _archives(tmp_path, [100] * 4 + [10_000] + [100] * 5)
    assert (archives[4],) in [manifests for manifests, _, _ in split_reads(archives, 2)[1]]
