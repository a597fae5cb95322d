"""`--incremental` on Beam: the local form's refresh (transforms/local/refresh.py) as steps,
decided by the same pure functions (transforms/plan/refresh.py `refresh_layout`, fed counts;
transforms/plan/refresh_match.py `match_bucket`, a key's rows and records at a time).

Manifest rows meet the published version's records in one shuffle keyed by row key, which
carries rows, fingerprints and record positions: never image bytes, and no step holds more than
one key's rows and records. The published shards are checked before it, so a record knows
whether its shard passed; their rows files are read a record at a time, each record given on as
it is read (transforms/write/published.py `listed_keys`), so the records of a rows file found
damaged midway are left out where they meet the rows, by a side input of such files
("unlisted"), as the local form leaves them out of its buckets. The layout is decided from
counts (per published shard its unchanged records, per split its rows to convert) before
anything is written; a past shard's kept records are then staged by the worker given its
positions (its final shard from a dict side input); carried archives as locally. Element shapes:

    CheckPublishedShards: [ShardInfo] (a thousand a batch)
        -> (key, (fingerprint, shard file, position, sound)), "verdicts": (shard file, sound),
           "unlisted": (shard file, True) for a rows file found damaged,
           "damaged": (archive file name, True) for a carried archive's record in a damaged shard
    ListCarriedAfterAll:  ManifestFile (carried) -> RowBatch, "errors": ErrorRow
    FingerprintRows:      RowBatch -> (key, (ManifestRow, fingerprint))
    MatchByKey:           (key, {"rows": [(row, fingerprint)], "past": [(fingerprint, ...)]})
    KeepOrConvert:        -> ManifestRow (to convert), "kept": (shard file, position),
                             "errors": ErrorRow (a row of a carried archive member's key)
    GroupKeptByShard:     (shard file, [position])
    DecideRefresh:        DatasetPlan (one) -> RefreshLayout (one)
    CarryShards:          (shard file, [position]) -> (shard file, ShardResult (staged))
"""

from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam
from apache_beam.pvalue import AsDict, TaggedOutput

from tfrecord_pipeline.transforms.archive.members import key_archive
from tfrecord_pipeline.transforms.beam.coders import RowBatch
from tfrecord_pipeline.transforms.beam.manifests import ReadWholeFn
from tfrecord_pipeline.transforms.beam.steps import as_row_batches, error_output
from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.manifest.sources import ManifestFile
from tfrecord_pipeline.transforms.plan.carried import NOTHING_UNREAD, Unread
from tfrecord_pipeline.transforms.plan.fingerprints import row_fingerprints
from tfrecord_pipeline.transforms.plan.refresh import PastShard, RefreshLayout, refresh_layout
from tfrecord_pipeline.transforms.plan.refresh_match import PastKey, listed, match_bucket
from tfrecord_pipeline.transforms.progress import Progress
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.storage.file_checks import check_shards
from tfrecord_pipeline.transforms.write.carried import stage_past
from tfrecord_pipeline.transforms.write.published import PublishedVersion, listed_keys
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult
from tfrecord_pipeline.transforms.write.threads import REMOTE_THREADS_PER_CORE

SHARDS_PER_CHECK = 1000  # published shards a worker checks in one element


class _RequestsFn(beam.DoFn):
    """A DoFn with a thread pool for stats and listings: on an object store each is a request,
    so many go at once."""

    def setup(self):
        self._pool = ThreadPoolExecutor(REMOTE_THREADS_PER_CORE, "stat")

    def teardown(self):
        self._pool.shutdown()


class _FingerprintFn(_RequestsFn):
    """(key, (row, fingerprint)) for every row: one stat each, or on Cloud Storage a folder's
    listing for many of a batch's rows."""

    def process(self, batch: RowBatch):
        rows = batch.rows
        for row, fingerprint in zip(rows, row_fingerprints(rows, self._pool.map), strict=True):
            yield row.key, (row, fingerprint)


class _CheckFn(_RequestsFn):
    """Checks a batch of published shards (transforms/storage/file_checks.py) and reads their
    rows files a record at a time: every record keyed by its key as it is read, with whether
    its shard passed its check; then each shard's verdict, and the rows files found damaged
    (their records given before the damage are left out by `_keep_or_convert`)."""

    def __init__(self, published: PublishedVersion, unread: frozenset[str]):
        self._published = published
        self._unread = unread  # the file names of the archives carried unread

    def process(self, shards):
        folder = self._published.folder
        requests = self._pool.map if fileio.is_remote(folder) else map
        for shard, ok in zip(shards, check_shards(folder, shards, requests), strict=True):
            unlisted = set()
            for past in listed_keys(self._published, shard, ok, unlisted):
                yield past.key, past[1:]  # the key once: the shuffle's
                if not ok and (archive := key_archive(past.key)) in self._unread:
                    yield TaggedOutput("damaged", (archive, True))
            yield TaggedOutput("verdicts", (shard.file, ok and not unlisted))
            if unlisted:
                yield TaggedOutput("unlisted", (shard.file, True))


def _in_batches(shards: list) -> list[list]:
    """The published shards, SHARDS_PER_CHECK to an element: a worker checks them together."""
    return [
        shards[start : start + SHARDS_PER_CHECK]
        for start in range(0, len(shards), SHARDS_PER_CHECK)
    ]


def _keep_or_convert(keyed, unlisted, unread: frozenset[str] = frozenset(), relisted=None):
    """A key's rows and records matched as a bucket of their own (`match_bucket`), the records
    of a rows file found damaged (`unlisted`) left out, those of the archives still `unread`
    (carried, but those `relisted`) kept: a record that stays gives its position to "kept";
    the rows to convert are given (those of a record that stays in a damaged shard too: its
    position still counted), and error rows tagged."""
    key, grouped = keyed
    past = listed((PastKey(key, *found) for found in grouped["past"]), unlisted)
    still = frozenset() if unlisted else unread.difference(relisted) if relisted else unread
    for matched in match_bucket(grouped["rows"], past, still):
        if isinstance(matched, PastKey):
            yield TaggedOutput("kept", (matched.file, matched.position))
        elif isinstance(matched, ErrorRow):
            yield error_output(matched)
        else:
            yield matched


def _relisted(manifest: ManifestFile, damaged, unlisted):
    """The carried archive, if it is to be listed after all (transforms/plan/carried.py)."""
    yield from Unread((manifest,)).listed(damaged, bool(unlisted))[0]


def _decide(plan, shards, kept, verdicts, converted):
    """`refresh_layout` from the steps' counts; `shards`: (split, file, records) of each
    published shard, in its metadata's order."""
    past = [
        PastShard(split, file, records, kept.get(file, 0), verdicts[file])
        for split, file, records in shards
    ]
    return refresh_layout(plan, past, converted)


@beam.typehints.with_output_types(tuple[str, ShardResult])
class _CarryFn(beam.DoFn):
    """Stages a published shard's kept records (transforms/write/carried.py `stage_past`) for
    the final shard the layout gives it; a damaged shard, which the layout leaves out, is not."""

    def __init__(self, published: PublishedVersion, staging: str, progress: Progress):
        self._published = published
        self._staging = staging
        self._progress = progress

    def setup(self):
        self._shards = self._published.by_file()

    def process(self, file_positions, sources):
        file, positions = file_positions
        if file not in sources:
            return
        (source, final), shard = sources[file], self._shards[file]
        kept = tuple(sorted(positions))
        result = stage_past(self._published, source, shard, kept, final, self._staging)
        self._progress.carried(result.staged, result.records)
        yield file, result


@beam.ptransform_fn
def _CountBySplit(batches):
    """Rows per split: (split, count)."""
    return (
        batches
        | "SplitOfEachRow" >> beam.FlatMap(lambda batch: [(row.split, 1) for row in batch.rows])
        | "Sum" >> beam.CombinePerKey(sum)
    )


class RefreshRows(beam.PTransform):
    """Decides the refresh of the published version by the rows, and stages the published
    shards' kept records. Returns {"rows": RowBatch (to convert), "layout": RefreshLayout (one
    element), "carried": (published shard file, ShardResult), "errors": ErrorRow}.

    Args:
      published: the published version the run started from.
      plan: the full conversion's DatasetPlan (one element).
      staging: the run's staging folder, where carried shards are written.
      progress: told the records of each carried shard.
      unread: the archives carried unread (transforms/plan/carried.py).
    """

    def __init__(self, published, plan, staging: str, progress: Progress, unread=NOTHING_UNREAD):
        super().__init__()
        self._published = published
        self._plan = plan
        self._staging = staging
        self._progress = progress
        self._unread = unread

    def expand(self, batches):
        shards = self._published.shards
        unread = self._unread.names
        checked = (
            batches.pipeline
            | "ListPublishedShards" >> beam.Create(_in_batches([shard for _, shard in shards]))
            | "CheckPublishedShards"
            >> beam.ParDo(_CheckFn(self._published, unread)).with_outputs(
                "verdicts", "unlisted", "damaged", main="records"
            )
        )
        damaged = checked.damaged | "DamagedArchives" >> beam.Distinct()
        relisted = (
            batches.pipeline
            | "CarriedArchives" >> beam.Create(self._unread.manifests)
            | "DamagedOnes" >> beam.FlatMap(_relisted, AsDict(damaged), AsDict(checked.unlisted))
            | "ListCarriedAfterAll"
            >> beam.ParDo(ReadWholeFn(self._unread.config)).with_outputs(
                "errors", "negatives", main="rows"
            )
        )
        fingerprinted = (
            (batches, relisted.rows)
            | "WithCarriedAfterAll" >> beam.Flatten()
            | "FingerprintRows" >> beam.ParDo(_FingerprintFn())
        )
        matched = (
            {"rows": fingerprinted, "past": checked.records}
            | "MatchByKey" >> beam.CoGroupByKey()
            | "KeepOrConvert"
            >> beam.FlatMap(
                _keep_or_convert, AsDict(checked.unlisted), unread, AsDict(damaged)
            ).with_outputs("kept", "errors", main="rows")
        )
        kept = matched.kept | "GroupKeptByShard" >> beam.GroupByKey()
        rows = as_row_batches(matched.rows)
        counts = kept | "CountKept" >> beam.MapTuple(lambda file, at: (file, len(list(at))))
        listed = [(split, shard.file, shard.records) for split, shard in shards]
        layout = self._plan | "DecideRefresh" >> beam.Map(
            _decide,
            listed,
            AsDict(counts),
            AsDict(checked.verdicts),
            AsDict(rows | "CountBySplit" >> _CountBySplit()),
        ).with_output_types(RefreshLayout)
        sources = layout | "PastSources" >> beam.FlatMap(
            lambda layout: (
                (source.file, (source, final)) for source, final in layout.past_sources()
            )
        )
        carry = _CarryFn(self._published, self._staging, self._progress)
        carried = kept | "CarryShards" >> beam.ParDo(carry, AsDict(sources))
        errors = (relisted.errors, matched.errors) | "RefreshErrors" >> beam.Flatten()
        return {"rows": rows, "layout": layout, "carried": carried, "errors": errors}
