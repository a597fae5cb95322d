"""WriteErrors: error rows from every step → counts per split and reason, and errors files.

    ErrorRow -> one ErrorCounts (a combiner: no step holds every row)
    ErrorRow -> ((file index, file count), ErrorRow), and an empty entry per file
        -> GroupByKey -> one ErrorFileResult per file, written by one worker
The pure parts (which file a row goes to, a file's bytes) are transforms/write/error_files.py.
"""

from collections import Counter

import apache_beam as beam
from apache_beam.pvalue import AsSingleton

from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.write.error_files import (
    ErrorCounts,
    ErrorFileResult,
    counted_as,
    error_file_count,
    file_of,
    write_error_file,
)


@beam.typehints.with_output_types(ErrorCounts)
class _CountErrorsFn(beam.CombineFn):
    """Error rows → one ErrorCounts; a Counter of (split, reason) per worker, merged."""

    def create_accumulator(self):
        return Counter()

    def add_input(self, counts, error):
        counts[counted_as(error)] += 1
        return counts

    def merge_accumulators(self, accumulators):
        merged, *rest = accumulators
        for counts in rest:
            merged.update(counts)
        return merged

    def extract_output(self, counts):
        return ErrorCounts.of(counts)


def _key_by_file(error: ErrorRow, counts: ErrorCounts, rows_per_file: int):
    count = error_file_count(counts.total, rows_per_file)
    return (file_of(error, count), count), error


def _every_error_file(counts: ErrorCounts, rows_per_file: int):
    """One empty entry per errors file, so a file that gets no rows is still written."""
    count = error_file_count(counts.total, rows_per_file)
    for index in range(count):
        yield (index, count), None


def _write_error_file(file_errors, staging: str) -> ErrorFileResult:
    (index, count), errors = file_errors
    return write_error_file(staging, index, count, (e for e in errors if e is not None))


class WriteErrors(beam.PTransform):
    """Counts the error rows per split and reason, and writes them as errors files into the
    run's staging folder, each file by one worker: no step holds every error row.

    Returns {"files": an ErrorFileResult per file, "counts": one ErrorCounts}.

    Args:
      staging: the run's staging folder; the commit step moves the files into the version.
      rows_per_file: about how many rows a file holds (their count decides how many files).
    """

    def __init__(self, staging: str, rows_per_file: int):
        super().__init__()
        self._staging = staging
        self._rows_per_file = rows_per_file

    def expand(self, errors):
        counts = errors | "CountErrors" >> beam.CombineGlobally(_CountErrorsFn())
        keyed = errors | "KeyByFile" >> beam.Map(
            _key_by_file, AsSingleton(counts), self._rows_per_file
        )  # ((index, count), ErrorRow)
        every_file = counts | "ListErrorFiles" >> beam.FlatMap(
            _every_error_file, self._rows_per_file
        )  # ((index, count), None)
        files = (
            (keyed, every_file)
            | "AddEmptyFiles" >> beam.Flatten()
            | "GroupByFile" >> beam.GroupByKey()  # ((index, count), [ErrorRow or None])
            | "WriteErrorFile"
            >> beam.Map(_write_error_file, self._staging).with_output_types(ErrorFileResult)
        )
        return {"files": files, "counts": counts}
