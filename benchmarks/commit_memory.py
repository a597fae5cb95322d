"""Memory of the commit step against the number of rejected rows: `python
benchmarks/commit_memory.py [N ...]` (default 1000 100000).

For each N, a manifest of the 40 sample images and N rows naming images that do not exist
(each one a `missing_file` error row, rejected by a shard writer as on Dataflow). One process
runs every step before the commit (transforms/local/conversion.py `run_here`: the functions the Beam
steps wrap) and saves what the commit step is given; a fresh process loads that and runs the commit
step alone (pipeline/dataset/commit.py `commit_dataset`). That process holds what a Dataflow worker
running the commit step holds: its side inputs and the commit's own work, nothing of the steps
before. Its peak RSS is exact, not sampled: the kernel's high-water mark, `VmHWM` in
/proc/self/status (not getrusage, whose figure for a process started by `subprocess` includes
its parent's peak before the exec). Writes benchmarks/results/commit-memory.json.
"""

import csv
import json
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parent / "sample"
TARGET = 1.05  # peak RSS of the commit step, most rejected rows against fewest: flat


def make_manifest(folder: Path, rejected: int) -> Path:
    """The sample images (absolute paths) and `rejected` rows naming files that do not exist."""
    with open(SAMPLE / "manifest.csv", newline="") as handle:
        rows = [
            {**row, "image_uri": str(SAMPLE / row["image_uri"])} for row in csv.DictReader(handle)
        ]
    labels = sorted({row["label"] for row in rows})
    rows += [
        {"image_uri": str(folder / "gone" / f"{i:07d}.jpg"), "label": labels[i % len(labels)]}
        for i in range(rejected)
    ]
    manifest = folder / "manifest.csv"
    with open(manifest, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["image_uri", "label"])
        writer.writeheader()
        writer.writerows(rows)
    return manifest


def stage(manifest: str, root: str, saved: str) -> None:
    """Every step before the commit, on the local runner; saves the commit's inputs."""
    from tfrecord_pipeline.config.arguments import parse_args
    from tfrecord_pipeline.config.conversion import prepare
    from tfrecord_pipeline.config.runner_choice import local_processes
    from tfrecord_pipeline.dataset import publish
    from tfrecord_pipeline.runners.job import conversion_job
    from tfrecord_pipeline.transforms.local.conversion import run_here, writer_processes
    from tfrecord_pipeline.transforms.progress import UNWATCHED

    argv = ["--manifest", manifest, "--output", root, "--num_shards", "2", "--max_error_rate", "1"]
    conversion = prepare(*parse_args([*argv, "--no_progress"]))
    target = publish.start(root)
    write = conversion.write_config(target.staging, local_processes(conversion.options.processes))
    # The job's publish step swapped for one that hands its inputs back.
    job = conversion_job(conversion, target, write)._replace(publish=lambda inputs: inputs)
    with writer_processes(write) as pool:
        inputs = run_here(job, pool, UNWATCHED)
    Path(saved).write_bytes(pickle.dumps((conversion.commit_config(target), inputs)))


def _status_mb(field: str) -> float:
    """`VmRSS` (now) or `VmHWM` (the peak since this process started) of this process."""
    with open("/proc/self/status") as handle:
        kb = next(int(line.split()[1]) for line in handle if line.startswith(f"{field}:"))
    return kb / 1024


def commit(saved: str) -> None:
    """The commit step alone, in this fresh process; prints its figures as one JSON line."""
    from tfrecord_pipeline.dataset.commit import commit_dataset

    before = _status_mb("VmRSS")  # the interpreter and the commit's imports
    start = time.perf_counter()
    info = commit_dataset(*pickle.loads(Path(saved).read_bytes()))
    seconds = time.perf_counter() - start
    peak = _status_mb("VmHWM")
    figures = {
        "imports_rss_mb": round(before, 1),
        "peak_rss_mb": round(peak, 1),
        "commit_s": round(seconds, 3),
        "records": info.records,
        "errors": info.errors,
        "error_files": len(info.error_files),
    }
    print(json.dumps(figures))


def _run(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), *sys.path])}
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{args[0]} failed: {done.stderr.decode()[-2000:]}")
    return done.stdout.decode()


def measure(rejected: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        manifest = make_manifest(Path(folder), rejected)
        saved = Path(folder) / "commit-inputs.pickle"
        _run("stage", str(manifest), str(Path(folder) / "out"), str(saved))
        figures = json.loads(_run("commit", str(saved)))
        return {"rejected_rows": rejected, "inputs_bytes": saved.stat().st_size, **figures}


def main(counts: list[int]) -> dict:
    runs = [measure(count) for count in counts]
    fewest, most = (
        min(runs, key=lambda r: r["rejected_rows"]),
        max(runs, key=lambda r: r["rejected_rows"]),
    )
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {
        "machine": machine,
        "runs": runs,
        "peak_rss_ratio": round(most["peak_rss_mb"] / fewest["peak_rss_mb"], 3),
        "inputs_bytes_ratio": round(most["inputs_bytes"] / fewest["inputs_bytes"], 3),
        "target": TARGET,
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["stage"]:
        stage(*sys.argv[2:5])
    elif sys.argv[1:2] == ["commit"]:
        commit(sys.argv[2])
    else:
        report = main([int(n) for n in sys.argv[1:]] or [1000, 100_000])
        for run in report["runs"]:
            print(
                f"{run['rejected_rows']:>9,} rejected rows: commit step peak RSS "
                f"{run['peak_rss_mb']} MB, inputs {run['inputs_bytes']:,} bytes"
            )
        mark = "ok" if report["peak_rss_ratio"] <= TARGET else "MISS"
        print(
            f"{mark} peak RSS, most against fewest rejected rows: {report['peak_rss_ratio']}"
            f" (target ≤ {TARGET})"
        )
        results = HERE / "results"
        results.mkdir(exist_ok=True)
        (results / "commit-memory.json").write_text(json.dumps(report, indent=2) + "\n")
