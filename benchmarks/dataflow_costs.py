"""What each step of a conversion costs, stage by stage:
`python benchmarks/dataflow_costs.py [N]` (N rows of the benchmark corpus, 20,000 by default).

Each Beam step's work is measured by calling the functions it wraps (transforms/beam/) on
the corpus, in one thread of this process, as CPU time (time.process_time): the manifest read,
the plan's accounting, the shard assignment, and the shard writer per image, pass-through and
re-encoding. The shuffle's bytes are the rows as Beam's coder writes them. The whole processes'
figures (benchmarks/writer_cpu.py, benchmarks/gcs_read_cost.py) and these shuffle bytes make
the Dataflow bill: benchmarks/dataflow_bill.py.

Each figure is the median of 3 rounds. Writes benchmarks/results/dataflow-costs.json.
"""

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import apache_beam as beam
from corpus import make_corpus

from tfrecord_pipeline.transforms.beam.coders import RowBatch
from tfrecord_pipeline.transforms.beam.plan import _AssignShardFn
from tfrecord_pipeline.transforms.beam.steps import ROWS_PER_BATCH
from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig
from tfrecord_pipeline.transforms.manifest.sources import check_manifests, read_all
from tfrecord_pipeline.transforms.plan.dataset import (
    LabelSource,
    PlanAccumulator,
    PlanConfig,
    decide_plan,
)
from tfrecord_pipeline.transforms.plan.sharding import DEFAULT_TARGET_SHARD_MB, ShardCounts, ShardId
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig, write_shard

HERE = Path(__file__).resolve().parent
WRITTEN_IMAGES = 400  # images the writer is timed on, each way


def cpu_us_per(count: int, work) -> float:
    start = time.process_time()
    work()
    return (time.process_time() - start) * 1e6 / count


def measure(count: int) -> dict:
    corpus_root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    corpus = make_corpus(corpus_root / f"tfrp-corpus-{count}", count)
    rows: list[ManifestRow] = []
    (manifest,) = check_manifests([str(corpus)], ReadConfig())
    read_us = cpu_us_per(count, lambda: rows.extend(read_all(manifest, ReadConfig())))
    accumulator = PlanAccumulator(ShardCounts(), sample_every_split=True)
    plan_us = cpu_us_per(count, lambda: [accumulator.add(row) for row in rows])
    config = PlanConfig(LabelSource(), ShardCounts(), DEFAULT_TARGET_SHARD_MB, 1 << 30)
    plan = decide_plan(accumulator.stats(), config)
    batches = [
        RowBatch(tuple(rows[start : start + ROWS_PER_BATCH]))
        for start in range(0, len(rows), ROWS_PER_BATCH)
    ]
    keyed: list = []
    assign = _AssignShardFn()
    assign_us = cpu_us_per(count, lambda: [keyed.extend(assign.process(b, plan)) for b in batches])
    coder = beam.coders.registry.get_coder(object)
    shuffled = sum(len(coder.encode(element)) for element in keyed)
    sample = rows[:WRITTEN_IMAGES]
    image_bytes = sum(os.path.getsize(row.image_uri) for row in rows) / len(rows)
    with tempfile.TemporaryDirectory() as out:

        def write(image: ImageConfig) -> float:
            config = WriteConfig(out, image=image)
            return cpu_us_per(
                len(sample),
                lambda: list(write_shard(ShardId("train", 0, 1), sample, plan.labels, config)),
            )

        pass_through_us = write(ImageConfig())
        reencode_us = write(ImageConfig(resize_short_side=256, jpeg_quality=90))
    return {
        "rows": count,
        "corpus_mean_image_kb": round(image_bytes / 1024, 1),
        "cpu_us_per_row": {
            "read_manifest": round(read_us, 2),
            "plan": round(plan_us, 2),
            "assign_shards": round(assign_us, 2),
        },
        "cpu_us_per_image": {
            "write_pass_through": round(pass_through_us, 1),
            "write_resize_256_q90": round(reencode_us, 1),
        },
        "shuffle_bytes_per_row": round(shuffled / count, 1),
    }


def median_of(rounds: list[dict]) -> dict:
    """Each figure's median over the rounds (this machine is shared: one round can be slow)."""
    first = rounds[0]
    return {
        key: median_of([r[key] for r in rounds])
        if isinstance(value, dict)
        else round(statistics.median(r[key] for r in rounds), 2)
        for key, value in first.items()
    }


def main(count: int, rounds: int = 3) -> dict:
    measured = median_of([measure(count) for _ in range(rounds)])
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "measured": measured,
    }


if __name__ == "__main__":
    report = main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
    print(json.dumps(report["measured"], indent=2))
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "dataflow-costs.json").write_text(json.dumps(report, indent=2) + "\n")
