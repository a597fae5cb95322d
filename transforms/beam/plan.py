"""The steps between reading and writing: PlanDataset decides the plan from every row,
DropDuplicateContent (--dedup) drops rows whose image bytes repeat, AssignShards keys each row by
its shard's piece. Thin wrappers over transforms/plan/.

    PlanDataset:          RowBatch -> DatasetPlan (one element)
    DropDuplicateContent: RowBatch -> {"rows": RowBatch, "errors": ErrorRow}
    AssignShards:         RowBatch -> {"keyed": (PieceKey, RowBatch), "errors": ErrorRow}
"""

import apache_beam as beam
from apache_beam.pvalue import AsSingleton

from tfrecord_pipeline.transforms.beam.coders import RowBatch
from tfrecord_pipeline.transforms.beam.steps import PieceKey, as_row_batches, error_output
from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.plan.dataset import (
    DatasetPlan,
    PlanAccumulator,
    PlanConfig,
    PlanStats,
    decide_plan,
)
from tfrecord_pipeline.transforms.plan.dedup import content_digest, keep_first
from tfrecord_pipeline.transforms.plan.grouping import group_by_shard
from tfrecord_pipeline.transforms.plan.sharding import ShardCounts, row_piece
from tfrecord_pipeline.transforms.progress import SILENT, Progress


class _PlanStatsFn(beam.CombineFn):
    def __init__(self, counts: ShardCounts, max_labels: int | None):
        self._counts = counts
        self._max_labels = max_labels

    def create_accumulator(self):
        return PlanAccumulator(self._counts, sample_every_split=True, max_labels=self._max_labels)

    def add_input(self, accumulator, batch):
        for row in batch.rows:
            accumulator.add(row)
        return accumulator

    def merge_accumulators(self, accumulators):
        merged, *rest = accumulators
        for accumulator in rest:
            merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator.stats()


def _decide_and_report(stats: PlanStats, config: PlanConfig, progress: Progress) -> DatasetPlan:
    """`decide_plan`, its rows then told to `progress`: the bar's total."""
    plan = decide_plan(stats, config)
    progress.planned(plan.row_count)
    return plan


@beam.ptransform_fn
def PlanDataset(rows, config: PlanConfig, progress: Progress = SILENT):
    """All rows → one DatasetPlan: label ids and each split's shard count (files over
    `config.max_file_bytes` weigh nothing in a split's size: they become error rows), and
    whether its records hold objects."""
    return (
        rows
        | "CollectStats"
        >> beam.CombineGlobally(_PlanStatsFn(config.counts, config.max_labels))  # one PlanStats
        | "DecideShards" >> beam.Map(_decide_and_report, config, progress)
    )


def _digest_rows(batch: RowBatch, max_file_bytes: int):
    for row in batch.rows:
        yield content_digest(row, max_file_bytes), row


def _keep_first(digest_and_rows):
    for item in keep_first(list(digest_and_rows[1])):
        yield error_output(item) if isinstance(item, ErrorRow) else item


@beam.ptransform_fn
def DropDuplicateContent(batches, max_file_bytes: int):
    """Rows whose image bytes repeat an earlier row's become errors (reads every image once
    more, none over `max_file_bytes`; only digests and rows cross the shuffle). Returns
    {"rows": RowBatch, "errors"}."""
    kept = (
        batches
        | "DigestContent" >> beam.FlatMap(_digest_rows, max_file_bytes)  # (digest, ManifestRow)
        | "GroupByContent" >> beam.GroupByKey()  # (digest, [ManifestRow])
        | "KeepFirst" >> beam.FlatMap(_keep_first).with_outputs("errors", main="rows")
    )
    return {"rows": as_row_batches(kept.rows), "errors": kept.errors}


@beam.typehints.with_output_types(tuple[PieceKey, RowBatch])
class _AssignShardFn(beam.DoFn):
    def process(self, batch, plan):
        errors: list[ErrorRow] = []
        by_shard = group_by_shard(batch.rows, plan, errors.append)
        yield from map(error_output, errors)
        for shard, rows in by_shard.items():
            pieces = plan.pieces_of(shard.split)
            by_piece: dict[int, list[ManifestRow]] = {}
            for row in rows:
                by_piece.setdefault(row_piece(row, shard.count, pieces), []).append(row)
            for piece, piece_rows in by_piece.items():
                yield (*shard, piece, pieces), RowBatch(tuple(piece_rows))


@beam.ptransform_fn
def AssignShards(rows, plan):
    """Split each batch by shard (and piece, for a shard written in pieces); rows whose label
    has no id become errors here, before the shuffle."""
    return rows | "KeyByShard" >> beam.ParDo(_AssignShardFn(), AsSingleton(plan)).with_outputs(
        "errors", main="keyed"
    )
