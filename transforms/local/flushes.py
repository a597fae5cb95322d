"""The local runner's shard files flushed to their disk here, on threads, while its writer
processes go on converting.

A writer that flushed its own file (fsync) would keep its core waiting on the disk at the end
of every shard: on 2 cores, 20,000 corpus images (600 MB) kept each writer ~5% of its time
waiting. So the local runner's writers leave their files unflushed (`WriteConfig.sync`), and
the run's process flushes each result's files as it comes, several at once; the stage ends only
once every file is on its disk, before anything describes them (the commit writes the version's
metadata after it). A file on an object store is persisted when its write returns.
"""

from concurrent.futures import Future, ThreadPoolExecutor

from tfrecord_pipeline.transforms.plan.rows_files import ROWS_SUFFIX
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write.shard_writer import INDEX_SUFFIX, ShardResult

FLUSH_THREADS = 4  # files flushed at once: each waits on the disk, with next to no CPU


def staged_files(result: ShardResult, staging: str) -> list[str]:
    """A shard's staged files in the staging folder: the shard, its rows file, its index."""
    shard = fileio.join(staging, result.staged)
    return [shard, f"{shard}{ROWS_SUFFIX}"] + [f"{shard}{INDEX_SUFFIX}"] * bool(result.index_file)


class Flushes:
    """A context manager: `flushed` hands a whole shard's files to the threads and gives the
    result back (a piece's are joined into its shard's file, which the join flushes:
    transforms/write/shard_pieces.py); leaving waits for every flush and raises the first
    error."""

    def __init__(self, staging: str):
        self._staging = staging
        self._pool = ThreadPoolExecutor(FLUSH_THREADS, "flush")
        self._pending: list[Future] = []

    def flushed(self, result):
        whole = isinstance(result, ShardResult) and result.piece.count == 1
        if whole and not fileio.is_remote(self._staging):
            for path in staged_files(result, self._staging):
                self._pending.append(self._pool.submit(fileio.sync_file, path))
        return result

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace) -> None:
        try:
            if error is None:
                for flush in self._pending:
                    flush.result()
        finally:
            self._pool.shutdown(cancel_futures=True)
