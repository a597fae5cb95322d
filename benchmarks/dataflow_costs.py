"""What a conversion needs on Dataflow, estimated from costs measured here, stage by stage:
`python benchmarks/dataflow_costs.py [N]` (N rows of the benchmark corpus, 20,000 by default).

Each Beam step's work is measured by calling the functions it wraps (transforms/beam/) on
the corpus, in one thread of this process, as CPU time (time.process_time): the manifest read,
the plan's accounting, the shard assignment, and the shard writer per image, pass-through and
re-encoding; and this process's CPU for one image read from Cloud Storage (its one request, to
the emulator on loopback, whose own CPU is not counted). The shuffle's bytes are the rows as
Beam's coder writes them. Those figures are measured; the table for 10^6-10^8 rows multiplies
them out under the assumptions in ASSUMPTIONS, and is an estimate.

Each figure is the median of 3 rounds. Writes benchmarks/results/dataflow-costs.json and prints
the README's table.
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
from emulator import BUCKET, environment, storage_emulator

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
    ShardCounts,
    decide_plan,
)
from tfrecord_pipeline.transforms.plan.sharding import DEFAULT_TARGET_SHARD_MB, ShardId
from tfrecord_pipeline.transforms.storage import fileio, gcs
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig, write_shard

HERE = Path(__file__).resolve().parent
WRITTEN_IMAGES = 400  # images the writer is timed on, each way
ASSUMPTIONS = {
    "worker_vcpus": 4,  # n1-standard-4, Dataflow's default batch machine
    "busy": 0.8,  # share of a worker's CPU doing this work (the rest: harness, shuffle I/O)
    "mean_image_kb": 110,  # ImageNet's mean JPEG; the corpus's own mean is reported beside
    "gcs_requests_per_image": 1,  # one media download (no metadata request first)
    "upload_chunk_mb": 8,  # resumable upload chunk: a shard's upload requests
    "requests_per_moved_file": 3,  # the commit's move: existence check, copy, delete
    "files_per_shard": 2,  # the shard and its rows file
    "gcs_read_latency_ms": 40,  # a small object's GET, first byte to last, from a worker
    "reads_in_flight_per_vcpu": 8,  # the shard writer's threads (REMOTE_THREADS_PER_CORE)
    "moves_in_flight": 64,  # the commit's (pipeline/dataset/publish.py REMOTE_MOVES_AT_ONCE)
}


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
        "cpu_us_per_gcs_image_read": round(gcs_read_us(sample), 1),
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


def gcs_read_us(rows: list[ManifestRow]) -> float:
    """This process's CPU for reading one image from Cloud Storage (the emulator)."""
    with storage_emulator() as (env, bucket), environment(env):
        for row in rows:
            bucket.blob(row.image).upload_from_filename(row.image_uri)
        uris = [f"gs://{BUCKET}/{row.image}" for row in rows]
        gcs.client.cache_clear()  # a client made before knows another emulator's address
        try:
            fileio.read_identified(uris[0])  # the client's connection and imports, not timed
            return cpu_us_per(len(uris), lambda: [fileio.read_identified(uri) for uri in uris])
        finally:
            gcs.client.cache_clear()  # its emulator is about to go


def estimate(measured: dict, rows: int, assumptions: dict = ASSUMPTIONS) -> dict:
    """One conversion's needs on Dataflow: vCPU-hours per stage, workers x hours, shuffle and
    Cloud Storage requests, from the measured per-row and per-image costs."""
    per_row = sum(measured["cpu_us_per_row"].values())
    images = measured["cpu_us_per_image"]
    read = measured["cpu_us_per_gcs_image_read"]
    shard_mb = DEFAULT_TARGET_SHARD_MB
    dataset_mb = rows * assumptions["mean_image_kb"] / 1024
    shards = max(1, round(dataset_mb / shard_mb))
    upload_requests = shards * (shard_mb // assumptions["upload_chunk_mb"] + 2)
    moves = shards * assumptions["files_per_shard"] * assumptions["requests_per_moved_file"]

    def worker_hours(us_per_item: float) -> float:
        vcpu_hours = rows * us_per_item / 3.6e9
        return vcpu_hours / assumptions["worker_vcpus"] / assumptions["busy"]

    # An image's read waits on the network: a vCPU keeps so many in flight, which bounds its
    # images a second as its CPU does; the smaller bound is the stage's.
    latency_us = assumptions["gcs_read_latency_ms"] * 1000 / assumptions["reads_in_flight_per_vcpu"]

    def writing(write_us: float) -> tuple[float, str]:
        cpu_us = read + write_us
        bound = "CPU" if cpu_us >= latency_us else "GCS latency"
        return round(worker_hours(per_row + max(cpu_us, latency_us)), 1), bound

    pass_through, pass_through_bound = writing(images["write_pass_through"])
    reencode, reencode_bound = writing(images["write_resize_256_q90"])
    commit_moves = shards * assumptions["files_per_shard"]
    return {
        "rows": rows,
        "rows_stages_worker_hours": round(worker_hours(per_row), 2),
        "pass_through_worker_hours": pass_through,
        "pass_through_bound": pass_through_bound,
        "reencode_worker_hours": reencode,
        "reencode_bound": reencode_bound,
        "shuffle_gb": round(rows * measured["shuffle_bytes_per_row"] / 1e9, 2),
        "shards": shards,
        "commit_minutes": round(
            commit_moves
            * assumptions["requests_per_moved_file"]
            * assumptions["gcs_read_latency_ms"]
            / assumptions["moves_in_flight"]
            / 60000,
            1,
        ),
        "gcs_requests_millions": round(
            (rows * assumptions["gcs_requests_per_image"] + upload_requests + moves) / 1e6, 2
        ),
    }


def markdown(estimates: list[dict]) -> str:
    lines = [
        "| rows | manifest rows: read, plan, assign | pass-through | re-encode (256 px, q90) "
        "| shuffle | shards of 150 MB | commit | GCS requests |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in estimates:
        lines.append(
            f"| 10^{len(str(e['rows'])) - 1} | {e['rows_stages_worker_hours']} | "
            f"{e['pass_through_worker_hours']} ({e['pass_through_bound']}) | "
            f"{e['reencode_worker_hours']} ({e['reencode_bound']}) | {e['shuffle_gb']} GB | "
            f"{e['shards']:,} | {e['commit_minutes']} min | {e['gcs_requests_millions']} M |"
        )
    return "\n".join(lines)


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
        "assumptions": ASSUMPTIONS,
        "estimates": [estimate(measured, rows) for rows in (10**6, 10**7, 10**8)],
    }


if __name__ == "__main__":
    report = main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
    print(json.dumps(report["measured"], indent=2))
    print(markdown(report["estimates"]))
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "dataflow-costs.json").write_text(json.dumps(report, indent=2) + "\n")
