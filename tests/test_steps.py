"""transforms/beam/steps.py, each step on its own in a TestPipeline (or its DoFn called
directly): reading manifests whole and in pieces, assigning shards, writing a shard whole or in
pieces."""

import json

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from conftest import encode, make_images, photo, write_manifest

from transforms.beam.steps import AssignShards, ReadManifests, WriteShards
from transforms.errors import ErrorRow
from transforms.manifest.labels import LabelMap
from transforms.manifest.rows import ManifestRow, ReadConfig, RowBatch, row_position
from transforms.manifest.sources import check_manifests, read_all, read_piece
from transforms.plan.dataset import DatasetPlan
from transforms.plan.sharding import ShardId, shard_for
from transforms.write.shard_writer import WriteConfig, write_shard

pytestmark = pytest.mark.slow


def test_read_manifests_and_assign_shards(tmp_path):
    manifest = write_manifest(
        tmp_path / "m.csv",
        [
            {"image_uri": "a.jpg", "label": "cat"},
            {"image_uri": "b.jpg", "label": "dog"},
            {"image_uri": "c.jpg", "label": ""},
        ],
    )
    plan = DatasetPlan(LabelMap(("cat",)), (("train", 2),), (("train", 4),))
    with BeamTestPipeline() as p:
        read = p | ReadManifests(check_manifests([str(manifest)], ReadConfig()), ReadConfig())
        keyed = read["rows"] | AssignShards(p | "Plan" >> beam.Create([plan]))
        shards = keyed.keyed | beam.FlatMap(lambda kv: [(kv[0], row.key) for row in kv[1].rows])
        assert_that(shards, equal_to([((*shard_for("a.jpg", "train", 4), 0, 1), "a.jpg")]))
        reasons = (
            (read["errors"], keyed.errors) | beam.Flatten() | beam.Map(lambda e: e.reason.value)
        )
        assert_that(reasons, equal_to(["bad_label", "unknown_label"]), label="Reasons")


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


@pytest.mark.parametrize("compress", [False, True])
def test_a_shard_written_in_pieces_is_the_shard_written_whole(tmp_path, compress):
    """Pieces written apart (by other workers, in any order) and joined give the shard's
    bytes, its index, its rows file and its counts, as one writer would."""
    images = make_images(tmp_path, per_class=6)
    rows = [
        ManifestRow(
            f"k{n}", str(tmp_path / image["image_uri"]), image["label"], "train", (), "m", n
        )
        for n, image in enumerate(images)
    ]
    rows.append(rows[3]._replace(position=99))  # a duplicate key: an error in its piece
    labels = LabelMap(tuple(sorted({row.label for row in rows})))
    staging = tmp_path / "staging"
    config = WriteConfig(str(staging), compress=compress, write_index=not compress)
    *whole_errors, whole = write_shard(ShardId("train", 0, 1), rows, labels, config)
    plan = DatasetPlan(labels, (("train", len(rows)),), (("train", 1),), (("train", 4),))

    def same_as_whole(results):
        [joined] = results
        assert joined.piece == (0, 1)
        assert (staging / joined.staged).read_bytes() == (staging / whole.staged).read_bytes()
        for suffix in [".rows", *([] if compress else [".idx"])]:
            text = (staging / (joined.staged + suffix)).read_text()
            assert text == (staging / (whole.staged + suffix)).read_text()
        assert joined._replace(staged=whole.staged) == whole

    with BeamTestPipeline() as p:
        batches = p | "Rows" >> beam.Create([RowBatch(tuple(rows))])
        plan_input = p | "Plan" >> beam.Create([plan])
        shards = (batches | AssignShards(plan_input)).keyed | WriteShards(plan_input, config)
        assert_that(shards["shards"], same_as_whole)
        errors = shards["errors"] | beam.Map(lambda e: (e.key, e.reason.value))
        assert_that(errors, equal_to([(e.key, e.reason.value) for e in whole_errors]), "Errors")
    assert len(list(staging.glob("train-*.rows"))) == 1 + 4 + 1  # whole, 4 pieces, joined


def _manifests_with_every_kind_of_line(folder) -> list[str]:
    """A CSV (CRLF, quotes, blank and bad lines, a BOM), a JSONL and a Parquet manifest."""
    csv_lines = [
        "image_uri,label,key",
        "a.jpg,cat,",
        "",
        '"b,1.jpg","dog",k2',
        "c.jpg",
        '"d.jpg","two',
        'lines"',
        "e.jpg,cat,k5,extra",
        "\xe9.jpg,\xe9l\xe8ve,",
    ]
    csv_body = "\r\n".join(csv_lines).encode("utf-8-sig") + b"\r\nf.jpg,\xff\r\n" + b"g.jpg,cat"
    (folder / "m.csv").write_bytes(csv_body)
    jsonl = [{"image_uri": f"{i}.jpg", "label": i % 3} for i in range(40)]
    lines = [json.dumps(row) for row in jsonl] + ["{not json", "", '{"label": "x"}', "[1]"]
    (folder / "m.jsonl").write_text("\n".join(lines))
    table = pa.table({"url": [f"p{i}.jpg" for i in range(50)], "label": [i % 4 for i in range(50)]})
    pq.write_table(table, folder / "m.parquet", row_group_size=3)
    return [str(folder / name) for name in ("m.csv", "m.jsonl", "m.parquet")]


@pytest.mark.parametrize("piece_bytes", [1, 5])
def test_the_splittable_read_in_tiny_pieces_gives_the_rows_of_a_whole_read(tmp_path, piece_bytes):
    """Files cut into pieces of a few bytes (hundreds of them, each line or row group read by
    the piece it begins in) give exactly what the local runner's one read of each file gives."""
    config = ReadConfig()
    manifests = check_manifests(_manifests_with_every_kind_of_line(tmp_path), config)
    whole = [item for manifest in manifests for item in read_all(manifest, config)]
    rows = [item for item in whole if isinstance(item, ManifestRow)]
    errors = [item for item in whole if isinstance(item, ErrorRow)]
    assert (len(rows), len(errors)) == (4 + 40 + 50, 5 + 3)
    assert all(manifest.size > 10 * piece_bytes for manifest in manifests)
    p = BeamTestPipeline()
    read = p | ReadManifests(manifests, config, piece_bytes)
    assert_that(read["rows"] | beam.FlatMap(lambda batch: batch.rows), equal_to(rows))
    assert_that(read["errors"], equal_to(errors), label="Errors")
    result = p.run()
    result.wait_until_finish()
    (pieces,) = result.metrics().query(MetricsFilter().with_name("manifest_pieces"))["counters"]
    assert pieces.committed >= sum(manifest.size for manifest in manifests) // piece_bytes // 2


@pytest.mark.parametrize("name", ["m.csv", "m.jsonl", "m.parquet"])
def test_a_piece_split_while_it_is_read_gives_every_row_once(tmp_path, name):
    """A runner may cut a piece being read at any byte past what the reader has claimed (here
    half-way through what is left, after 3 records): the reader stops at the cut, and the
    range beyond it, read on its own, gives the rest."""
    config = ReadConfig()
    paths = _manifests_with_every_kind_of_line(tmp_path)
    (manifest,) = check_manifests([p for p in paths if p.endswith(name)], config)
    whole = list(read_all(manifest, config))
    tracker = OffsetRestrictionTracker(OffsetRange(manifest.body, manifest.size))
    read, residual = [], None
    for item in read_piece(manifest, manifest.body, manifest.size, config, tracker.try_claim):
        read.append(item)
        if len(read) == 3:
            _, residual = tracker.try_split(0.5)
    tracker.check_done()
    rest = OffsetRestrictionTracker(residual)
    read += read_piece(manifest, residual.start, residual.stop, config, rest.try_claim)
    rest.check_done()
    assert read == whole and residual.start < manifest.size
