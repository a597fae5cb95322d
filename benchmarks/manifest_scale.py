"""Memory of reading a manifest as it grows: `python benchmarks/manifest_scale.py 20000 2000000`.

For each row count N, a CSV manifest of N rows (no images: neither measured step opens one) is
put on a Cloud Storage emulator (gcp-storage-emulator on loopback), and two whole processes are
measured by measure.py:
- the launcher: `tfrecord-pipeline convert` building the Dataflow job for `gs://.../N.csv` with
  `--dry_run=True` (flags as tests/test_dataflow.py gives them), the job built, never submitted;
- a worker's manifest parsing: the ReadManifests step alone on the DirectRunner, over the same
  `gs://` manifest, every row batch counted and dropped.
Each figure is the largest single process's peak RSS; the largest N is compared with the
smallest. Writes benchmarks/results/manifest-scale.json.
"""

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from emulator import BUCKET, storage_emulator
from measure import run_measured

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
CLI = str(BIN / "tfrecord-pipeline")
LABELS = ("astronaut", "chelsea", "coffee", "rocket")
DATAFLOW = [
    "--runner=DataflowRunner",
    "--dry_run=True",
    "--no_auth",
    "--project=bench",
    "--region=us-central1",
    f"--temp_location=gs://{BUCKET}/tmp",
    f"--setup_file={ROOT}/setup.py",
]
TARGET_RATIO = 1.2
TARGET_LAUNCHER_MB = 300


def write_manifest(path: Path, rows: int) -> Path:
    """A CSV of `rows` rows like the benchmark corpus's (about 34 bytes a row)."""
    if path.exists():
        return path
    with open(path, "w") as handle:
        handle.write("image_uri,label\n")
        for start in range(0, rows, 100_000):
            handle.write(
                "".join(
                    f"images/{LABELS[i % 4]}/{i:08d}.jpg,{LABELS[i % 4]}\n"
                    for i in range(start, min(rows, start + 100_000))
                )
            )
    return path


def _check_count(read: int, rows: int) -> None:
    if read != rows:
        raise AssertionError(f"the read step read {read:,} rows of {rows:,}")


def read_step(manifest: str, rows: int) -> None:
    """The ReadManifests step alone on the DirectRunner: rows counted, then dropped."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from tfrecord_pipeline.transforms.beam.manifests import ReadManifests
    from tfrecord_pipeline.transforms.manifest.rows import ReadConfig
    from tfrecord_pipeline.transforms.manifest.sources import check_manifests

    config = ReadConfig()
    options = PipelineOptions(["--runner=DirectRunner", "--direct_num_workers=1"])
    with beam.Pipeline(options=options) as p:
        read = p | "ReadManifests" >> ReadManifests(check_manifests([manifest], config), config)
        _ = (
            read["rows"]
            | "CountRows" >> beam.Map(lambda batch: len(batch.rows))
            | "Sum" >> beam.CombineGlobally(sum)
            | "CheckCount" >> beam.Map(_check_count, rows)
        )


def measure_size(rows: int, env: dict, bucket, work: Path) -> dict:
    path = write_manifest(work / f"manifest-{rows}.csv", rows)
    bucket.blob(path.name).upload_from_filename(str(path))
    manifest = f"gs://{BUCKET}/{path.name}"
    output = f"gs://{BUCKET}/out-{rows}-{time.time_ns()}"
    launch = [CLI, "convert", "--manifest", manifest, "--output", output, *DATAFLOW]
    launcher = run_measured(launch, env=env)
    worker = run_measured([sys.executable, __file__, "--read-step", manifest, str(rows)], env=env)
    return {
        "rows": rows,
        "manifest_mb": round(path.stat().st_size / 1e6, 1),
        "launcher": launcher,
        "read_step": worker,
    }


def ratio(results: list[dict], step: str) -> float:
    largest, smallest = results[-1][step], results[0][step]
    return round(largest["peak_rss_process_mb"] / smallest["peak_rss_process_mb"], 2)


def main(counts: list[int]) -> dict:
    work = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir())) / "tfrp-manifest-scale"
    work.mkdir(parents=True, exist_ok=True)
    env_path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    with storage_emulator() as (env, bucket):
        env["PYTHONPATH"] = env_path.rstrip(os.pathsep)
        results = []
        for rows in sorted(counts):
            results.append(measure_size(rows, env, bucket, work))
            launcher, worker = results[-1]["launcher"], results[-1]["read_step"]
            print(
                f"{rows:>11,} rows  launcher {launcher['peak_rss_process_mb']:7.1f} MB"
                f"  read step {worker['peak_rss_process_mb']:7.1f} MB",
                flush=True,
            )
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {
        "machine": machine,
        "sizes": results,
        "launcher_ratio": ratio(results, "launcher"),
        "read_step_ratio": ratio(results, "read_step"),
        "launcher_peak_mb": max(r["launcher"]["peak_rss_process_mb"] for r in results),
        "targets": {"ratio": TARGET_RATIO, "launcher_mb": TARGET_LAUNCHER_MB},
    }


if __name__ == "__main__":
    if sys.argv[1] == "--read-step":
        read_step(sys.argv[2], int(sys.argv[3]))
        sys.exit(0)
    report = main([int(n) for n in sys.argv[1:]])
    for label, value in (
        ("launcher", report["launcher_ratio"]),
        ("read step", report["read_step_ratio"]),
    ):
        mark = "ok " if value <= TARGET_RATIO else "MISS"
        print(
            f"{mark} {label} peak RSS, largest / smallest manifest: {value:.2f}x "
            f"(target ≤ {TARGET_RATIO}x)"
        )
    mark = "ok " if report["launcher_peak_mb"] < TARGET_LAUNCHER_MB else "MISS"
    print(
        f"{mark} launcher peak RSS {report['launcher_peak_mb']:.0f} MB "
        f"(target < {TARGET_LAUNCHER_MB} MB)"
    )
    out = HERE / "results" / "manifest-scale.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
