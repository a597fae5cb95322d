"""transforms/plan/dedup.py: a row whose image bytes repeat an earlier row's is an error row."""

from conftest import manifest_row

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason
from tfrecord_pipeline.transforms.manifest.rows import row_position
from tfrecord_pipeline.transforms.plan.dedup import keep_first


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
