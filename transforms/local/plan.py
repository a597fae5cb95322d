"""--dedup on this machine: rows whose image bytes repeat an earlier row's become error rows
(transforms/plan/dedup.py decides which; transforms/beam/plan.py `DropDuplicateContent` is the
Beam form), the rows meeting in buckets by a hash of the digest, each bucket grouped alone."""

import itertools
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from tfrecord_pipeline.transforms.local.error_sink import ErrorSink
from tfrecord_pipeline.transforms.local.row_buckets import RowBuckets, bucket_count, hash_bucket
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.plan.dedup import content_digest, first_of_each
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write.in_flight import IN_FLIGHT_PER_THREAD, ordered_map
from tfrecord_pipeline.transforms.write.threads import REMOTE_THREADS_PER_CORE, available_cores

DIGESTS = "digests"  # --dedup's buckets (with a number each): rows with their image's digest


def drop_duplicate_content(
    rows: Iterable[ManifestRow],
    count: int,
    max_file_bytes: int,
    errors: ErrorSink,
    buckets: RowBuckets,
) -> Iterator[ManifestRow]:
    """The rows left once those whose image bytes repeat an earlier row's went to `errors` as
    error rows: each of the `count` rows with its file's digest into `buckets` by a hash of the
    digest, then each bucket grouped alone as it is read (the rows of one digest are held
    together, as Beam's GroupByKey gives them). The files are read and hashed on threads (file
    reads and SHA-256 release the GIL): many per core for `gs://`."""
    rows = iter(rows)
    first = next(rows, None)
    if first is None:
        return iter(())
    remote = fileio.is_remote(first.image_uri)
    threads = available_cores() * (REMOTE_THREADS_PER_CORE if remote else 1)
    shares = bucket_count(count)

    def digested(row: ManifestRow) -> tuple[str, ManifestRow]:
        return content_digest(row, max_file_bytes), row

    with ThreadPoolExecutor(threads, "digest") as pool:
        # A window of futures, not Executor.map's one a row submitted at once (~1 KB each).
        window = threads * IN_FLIGHT_PER_THREAD
        for digest, row in ordered_map(pool, digested, itertools.chain([first], rows), window):
            buckets.add((DIGESTS, hash_bucket(digest, shares)), (digest, row))
    groups = (first_of_each(buckets.take((DIGESTS, share))) for share in range(shares))
    return errors.passed(itertools.chain.from_iterable(groups))
