"""WriteShards: rows keyed by shard piece → one staged file per planned shard.

    (PieceKey, RowBatch), and an empty batch per planned piece -> GroupByKey
        -> (PieceKey, [RowBatch]) -> one piece written -> ShardResult (+ "errors": ErrorRow)
        -> the pieces of a shard grouped and joined -> ShardResult per shard
Only manifest rows cross the first GroupByKey and only ShardResults the second: image bytes are
read after the shuffle, by the shard writer (transforms/write/).
"""

from collections.abc import Iterable

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pvalue import AsSingleton

from tfrecord_pipeline.transforms.beam.coders import RowBatch
from tfrecord_pipeline.transforms.beam.steps import NAMESPACE, error_output
from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.plan.grouping import all_shards
from tfrecord_pipeline.transforms.plan.sharding import Piece, ShardId
from tfrecord_pipeline.transforms.progress import SILENT, Progress
from tfrecord_pipeline.transforms.write.shard_pieces import join_staged
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult, WriteConfig
from tfrecord_pipeline.transforms.write.tasks import ShardWriter, shard_task


def _all_pieces(plan):
    """One empty batch per planned shard piece, so one that gets no rows is still written."""
    for shard in all_shards(plan):
        pieces = plan.pieces_of(shard.split)
        for piece in range(pieces):
            yield (*shard, piece, pieces), RowBatch(())


@beam.typehints.with_output_types(ShardResult)
class _WriteShardFn(beam.DoFn):
    """Writes each shard as it comes, in this worker's process: the runner spreads the shards
    over its worker processes (transforms/local/pool.py)."""

    def __init__(self, config: WriteConfig, progress: Progress):
        self._config = config
        self._progress = progress

    def setup(self):
        self._writer = ShardWriter()

    def process(self, keyed_batches, plan):
        (split, index, count, piece, pieces), batches = keyed_batches
        rows = [row for batch in batches for row in batch.rows]
        shard, part = ShardId(split, index, count), Piece(piece, pieces)
        task = shard_task(shard, rows, plan, self._config, piece=part)
        yield from _shard_outputs(self._writer.write(task, self._progress))

    def teardown(self):
        self._writer.close()


def _shard_outputs(written: Iterable[ErrorRow | ShardResult]):
    """The writer's outputs as the step's: error rows to "errors", results counted."""
    for item in written:
        if isinstance(item, ErrorRow):
            yield error_output(item)
        else:
            Metrics.counter(NAMESPACE, "records").inc(item.records)
            Metrics.counter(NAMESPACE, "bytes").inc(item.bytes)
            yield item


def _join_pieces(keyed_pieces, config: WriteConfig) -> ShardResult:
    _, pieces = keyed_pieces
    return join_staged(list(pieces), config.staging, config.shard_format)


class WriteShards(beam.PTransform):
    """Groups rows by shard and writes every planned shard; a shard larger than the target size
    (`--num_shards` can ask for one) is written in pieces, by several workers at once, then its
    pieces are joined (on Cloud Storage, composed) into the one file: no shard is one
    all-or-nothing unit of work, and the bytes are those of the shard written whole
    (transforms/plan/sharding.py `piece_of`). Returns {"shards": ShardResult, "errors": ErrorRow}.

    Args:
      plan: the DatasetPlan side input (label ids, shard counts, pieces).
      config: the run's staging folder, image settings and format of the shards.
      progress: told the rows of each shard as they are written.
    """

    def __init__(self, plan, config: WriteConfig, progress: Progress = SILENT):
        super().__init__()
        self._plan = plan
        self._config = config
        self._progress = progress

    def expand(self, keyed_rows):
        every_piece = self._plan | "ListShards" >> beam.FlatMap(_all_pieces)
        written = (
            (keyed_rows, every_piece)  # (PieceKey, RowBatch)
            | "AddEmptyShards" >> beam.Flatten()
            | "GroupRowsByShard" >> beam.GroupByKey()  # (PieceKey, [RowBatch])
            | "WriteShard"
            >> beam.ParDo(
                _WriteShardFn(self._config, self._progress), AsSingleton(self._plan)
            ).with_outputs("errors", main="shards")
        )  # a ShardResult per piece, and "errors"
        return {"shards": self._joined(written.shards), "errors": written.errors}

    def _joined(self, written):
        """The results of whole shards as they are; the pieces of each other shard joined."""
        whole, pieces = written | "WholeOrPiece" >> beam.Partition(
            lambda result, _: int(result.piece.count > 1), 2
        )
        joined = (
            pieces
            | "KeyPieceByShard" >> beam.Map(lambda part: ((part.split, part.index), part))
            | "GroupPieces" >> beam.GroupByKey()  # ((split, index), [ShardResult])
            | "JoinPieces" >> beam.Map(_join_pieces, self._config).with_output_types(ShardResult)
        )
        return (whole, joined) | "EveryShard" >> beam.Flatten().with_output_types(ShardResult)
