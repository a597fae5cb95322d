"""transforms/beam/manifests.py: what a reader yields, as the read steps' outputs; the
splittable read in pieces, however small and wherever the runner splits them, gives the rows of
a whole read."""

import json

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.pvalue import TaggedOutput
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from tfrecord_pipeline.transforms.beam.coders import RowBatch
from tfrecord_pipeline.transforms.beam.manifests import ReadManifests, _outputs
from tfrecord_pipeline.transforms.beam.steps import ROWS_PER_BATCH
from tfrecord_pipeline.transforms.errors import ErrorRow, Reason
from tfrecord_pipeline.transforms.manifest.rows import (
    DroppedNegative,
    ManifestRow,
    ReadConfig,
    SkippedFile,
)
from tfrecord_pipeline.transforms.manifest.sources import check_manifests, read_all, read_piece
from tfrecord_pipeline.transforms.manifest.trees import TreeFolder


def test_rows_go_out_in_batches_and_everything_else_tagged():
    rows = [ManifestRow(f"k{n}", "x.jpg", "cat", "train", (), "m", n) for n in range(2500)]
    error = ErrorRow("bad", "m@7", Reason.BAD_ROW, "no label")
    others = [error, TreeFolder(0, "/root", "cat/"), DroppedNegative("m@9"), SkippedFile("a.txt")]
    read = [*rows[:1200], *others, *rows[1200:]]

    outputs = list(_outputs(read))

    batches = [output for output in outputs if isinstance(output, RowBatch)]
    assert [len(batch.rows) for batch in batches] == [ROWS_PER_BATCH, ROWS_PER_BATCH, 500]
    assert [row for batch in batches for row in batch.rows] == rows  # in the reader's order
    tagged = [(output.tag, output.value) for output in outputs if isinstance(output, TaggedOutput)]
    assert tagged == list(zip(["errors", "folders", "negatives", "skipped"], others, strict=True))


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


@pytest.mark.slow
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


@pytest.mark.slow
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
