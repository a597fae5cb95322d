"""transforms/beam/manifests.py: what a reader yields, as the read steps' outputs."""

from apache_beam.pvalue import TaggedOutput

from transforms.beam.coders import RowBatch
from transforms.beam.manifests import _outputs
from transforms.beam.steps import ROWS_PER_BATCH
from transforms.errors import ErrorRow, Reason
from transforms.manifest.rows import DroppedNegative, ManifestRow, SkippedFile
from transforms.manifest.trees import TreeFolder


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
