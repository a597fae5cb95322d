"""The command's logging leaves out what a library says about an extra not installed."""

import logging

from tfrecord_pipeline.cli import logs


def test_beam_missing_apitools_is_not_logged_and_other_warnings_are(caplog):
    logs.configure()
    logs.configure()  # main() runs it once a command: a second time adds nothing
    logging.warning("apitools not found, and bigquery client libraries are not available")
    logging.warning("something else")
    assert [record.getMessage() for record in caplog.records] == ["something else"]
    assert logging.getLogger().filters.count(logs._not_apitools_missing) == 1
