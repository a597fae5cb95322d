"""`--incremental` on Beam: pipeline/runners/refresh.py's refresh as steps.

Manifest rows meet the published version's records in one shuffle keyed by row key, which
carries rows, fingerprints and record positions: never image bytes, and no step holds more than
one key's rows or one shard's records. A past shard's kept records are carried by the worker
that gets that shard's positions.

    RefreshRows: RowBatch -> {"rows": RowBatch (to convert), "carried": ShardResult (staged)}
"""

from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam
from apache_beam.pvalue import TaggedOutput

from pipeline.dataset.previous import Previous
from pipeline.runners.refresh import carry_shard
from transforms.beam.coders import RowBatch
from transforms.beam.steps import as_row_batches
from transforms.plan.refresh import Reuse, read_rows, row_fingerprint, row_fingerprints, stays
from transforms.progress import Progress
from transforms.storage import fileio
from transforms.write.shard_writer import ShardResult
from transforms.write.threads import REMOTE_THREADS_PER_CORE


class _FingerprintFn(beam.DoFn):
    """(key, (row, fingerprint)) for every row: one stat each, or on Cloud Storage a folder's
    listing for many of a batch's rows; many at once on an object store, where a stat or a
    listing is a request."""

    def setup(self):
        self._pool = ThreadPoolExecutor(REMOTE_THREADS_PER_CORE, "stat")

    def process(self, batch: RowBatch):
        rows = batch.rows
        remote = bool(rows) and fileio.is_remote(rows[0].image_uri)
        found = row_fingerprints(rows, self._pool.map) if remote else map(row_fingerprint, rows)
        for row, fingerprint in zip(rows, found, strict=True):
            yield row.key, (row, fingerprint)

    def teardown(self):
        self._pool.shutdown()


def _past_records(shard: tuple[str, str, str], folder: str):
    """(key, (file, position, fingerprint)) for every record of one published shard."""
    _, file, rows_file = shard
    for position, record in enumerate(read_rows(fileio.read_text(fileio.join(folder, rows_file)))):
        yield record.key, (file, position, record.fingerprint)


def _keep_or_convert(keyed):
    """A key's past record stays (its position goes to "kept"), or its rows are converted."""
    _, grouped = keyed
    rows = list(grouped["rows"])
    fingerprints = [fingerprint for _, fingerprint in rows]
    for file, position, past in grouped["past"]:
        if stays(fingerprints, past):
            yield TaggedOutput("kept", (file, position))
            return
    for row, _ in rows:
        yield row


@beam.typehints.with_output_types(ShardResult)
class _CarryFn(beam.DoFn):
    def __init__(self, previous: Previous, staging: str, progress: Progress):
        self._previous = previous
        self._staging = staging
        self._progress = progress

    def process(self, file_positions):
        file, positions = file_positions
        info = self._previous.info
        split, shard = next(
            (name, shard)
            for name, split in info.splits.items()
            for shard in split.shards
            if shard.file == file
        )
        records = read_rows(fileio.read_text(fileio.join(self._previous.folder, shard.rows)))
        kept = set(positions)
        keep = tuple(position in kept for position in range(len(records)))
        reuse = Reuse(split, file, None if all(keep) else keep, tuple(records))
        compress = info.compression == "gzip"
        result = carry_shard(reuse, shard, self._previous.folder, self._staging, compress)
        self._progress.carried(result.staged, result.records)
        yield result


class RefreshRows(beam.PTransform):
    """Splits rows into those whose published records stay, carried as staged shards, and
    those to convert.

    Args:
      previous: the published version the run started from.
      staging: the run's staging folder, where carried shards are written.
      progress: told the records of each carried shard.
    """

    def __init__(self, previous: Previous, staging: str, progress: Progress):
        super().__init__()
        self._previous = previous
        self._staging = staging
        self._progress = progress

    def expand(self, batches):
        shards = [
            (name, shard.file, shard.rows)
            for name, split in sorted(self._previous.info.splits.items())
            for shard in split.shards
        ]
        fingerprinted = batches | "FingerprintRows" >> beam.ParDo(_FingerprintFn())
        past = (
            batches.pipeline
            | "ListPublishedShards" >> beam.Create(shards)
            | "ReadPublishedRecords" >> beam.FlatMap(_past_records, self._previous.folder)
        )
        matched = (
            {"rows": fingerprinted, "past": past}
            | "MatchByKey" >> beam.CoGroupByKey()
            | "KeepOrConvert" >> beam.FlatMap(_keep_or_convert).with_outputs("kept", main="rows")
        )
        carried = (
            matched.kept
            | "GroupKeptByShard" >> beam.GroupByKey()
            | "CarryShards" >> beam.ParDo(_CarryFn(self._previous, self._staging, self._progress))
        )
        return {"rows": as_row_batches(matched.rows), "carried": carried}
