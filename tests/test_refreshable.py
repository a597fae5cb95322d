"""Whether --incremental may reuse the published version: recorded options compared."""

from conftest import dataset_info

from tfrecord_pipeline.config.options import ConvertOptions
from tfrecord_pipeline.dataset.previous import Previous
from tfrecord_pipeline.runners.refreshable import why_not_refreshable


def test_an_option_a_version_predates_counts_as_its_default():
    """A version published before --file_format existed is refreshed, not converted again,
    by a run at its default; another value converts every row."""
    recorded = ConvertOptions(manifest=[], output="out").recorded()
    older = Previous("v1", dataset_info(options={**recorded}))
    del older.info.options["file_format"]
    assert why_not_refreshable(older, recorded) is None
    other = {**recorded, "file_format": "array_record"}
    assert "['file_format']" in why_not_refreshable(older, other)


def test_a_label_limit_changes_no_record_so_a_refresh_under_another_keeps_them():
    recorded = ConvertOptions(manifest=[], output="out").recorded()
    published = Previous("v1", dataset_info(options={**recorded}))
    assert why_not_refreshable(published, {**recorded, "max_labels": 200_000}) is None


def test_a_version_recorded_with_an_older_spelling_refreshes_without_reconverting():
    """`--validate structural` and `full` made the `scans` check: a version that recorded
    either is refreshed by a run that says `scans`, not converted again."""
    recorded = ConvertOptions(manifest=[], output="out").recorded()
    assert recorded["validate"] == "scans"
    for spelling in ("structural", "full"):
        older = Previous("v1", dataset_info(options={**recorded, "validate": spelling}))
        assert why_not_refreshable(older, recorded) is None
        assert ConvertOptions(manifest=[], output="out", validate=spelling).recorded() == recorded
    stricter = {**recorded, "validate": "pixels"}
    assert "['validate']" in why_not_refreshable(
        Previous("v1", dataset_info(options=recorded)), stricter
    )
