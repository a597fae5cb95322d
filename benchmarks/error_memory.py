"""Peak memory of a run whose rows are all duplicates: `python benchmarks/error_memory.py
[--rounds R] [N ...]` (default 3 rounds of N = 1000000).

For each N, two manifests in a temporary folder, each naming one sample image N times: under
one key (N - 1 `duplicate_key` rows, rejected by the shard writer) and under N keys, converted
with --dedup (N - 1 `duplicate_content` rows, rejected before the shards). Each is converted by
the command on the local runner, with its default processes and with --processes 1, and the
peak RSS of the whole process tree is sampled (benchmarks/measure.py); a round's figure is the
median of R rounds. The target: under 300 MB at N = 10^6.

The floor: the local runner holds every manifest row in memory until its shard is written, so a
fresh process that reads the same manifest's rows as the local runner does (and nothing else)
gives what the rows alone cost; its peak is exact, the kernel's high-water mark (`VmHWM`). With
several processes, a shard's rows are also copied into the worker that writes it: all N rows,
here, since one key puts them in one shard. Writes benchmarks/results/error-memory.json.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import run_measured

HERE = Path(__file__).resolve().parent
SAMPLE_IMAGE = HERE.parent / "sample" / "images" / "astronaut" / "astronaut_0.jpg"
BIN = Path(sys.executable).parent / "tfrecord-pipeline"
TARGET_MB = 300
CASES = {"duplicate_key": [], "duplicate_content": ["--dedup"]}
PROCESSES = {"default processes": [], "--processes 1": ["--processes", "1"]}


def make_manifests(folder: Path, rows: int) -> dict[str, Path]:
    """The sample image `rows` times: under one key, and under a key a row."""
    image = str(SAMPLE_IMAGE)
    one_key, own_keys = folder / "one-key.csv", folder / "own-keys.csv"
    one_key.write_text("image_uri,label\n" + f"{image},astronaut\n" * rows)
    with open(own_keys, "w") as handle:
        handle.write("key,image_uri,label\n")
        handle.writelines(f"k{i:09d},{image},astronaut\n" for i in range(rows))
    return {"duplicate_key": one_key, "duplicate_content": own_keys}


def floor(manifest: str) -> None:
    """In this fresh process: the command's imports, then the manifest's rows read as the local
    runner reads them; prints the peak RSS as one JSON line."""
    from tfrecord_pipeline.cli import main as _  # noqa: F401 - the command's imports
    from tfrecord_pipeline.config.arguments import parse_args
    from tfrecord_pipeline.config.conversion import prepare
    from tfrecord_pipeline.transforms.local.error_sink import ErrorSink
    from tfrecord_pipeline.transforms.local.manifests import read_rows

    with tempfile.TemporaryDirectory() as staging:
        argv = ["--manifest", manifest, "--output", staging, "--no_progress"]
        conversion = prepare(*parse_args(argv))
        rows = []  # held, as the local runner once held them
        read_rows(*conversion.manifests(), ErrorSink(staging), rows.append)
        with open("/proc/self/status") as handle:
            kb = next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:"))
    print(json.dumps({"rows": len(rows), "rows_floor_mb": round(kb / 1024, 1)}))


def _floor(manifest: Path) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), *sys.path])}
    done = subprocess.run(
        [sys.executable, __file__, "floor", str(manifest)], capture_output=True, env=env
    )
    if done.returncode:
        raise RuntimeError(f"floor failed: {done.stderr.decode()[-2000:]}")
    return json.loads(done.stdout)["rows_floor_mb"]


def convert(manifest: Path, flags: list[str]) -> dict:
    """One conversion by the command: its time, peak RSS and rejected rows."""
    with tempfile.TemporaryDirectory() as out:
        command = [str(BIN), "convert", "--manifest", str(manifest), "--output", out]
        command += ["--max_error_rate", "1", "--no_progress", *flags]
        figures = run_measured(command)
        version = json.loads((Path(out) / "LATEST").read_text())["version"]
        info = json.loads((Path(out) / "versions" / version / "tfrecord_pipeline.json").read_text())
    return {**figures, "errors": info["errors"], "errors_by_reason": info["errors_by_reason"]}


def measure(rows: int, rounds: int) -> list[dict]:
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        manifests = make_manifests(Path(folder), rows)
        for case, case_flags in CASES.items():
            rows_floor = _floor(manifests[case])
            for processes, flags in PROCESSES.items():
                samples = [convert(manifests[case], [*case_flags, *flags]) for _ in range(rounds)]
                peak = statistics.median(s["peak_rss_tree_mb"] for s in samples)
                runs.append(
                    {
                        "rows": rows,
                        "case": case,
                        "processes": processes,
                        "errors": samples[0]["errors"],
                        "seconds": statistics.median(s["seconds"] for s in samples),
                        "peak_rss_tree_mb": peak,
                        "peak_rss_process_mb": statistics.median(
                            s["peak_rss_process_mb"] for s in samples
                        ),
                        "rows_floor_mb": rows_floor,
                        "over_floor_mb": round(peak - rows_floor, 1),
                        "samples_mb": [s["peak_rss_tree_mb"] for s in samples],
                    }
                )
    return runs


def main(counts: list[int], rounds: int = 3) -> dict:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    runs = [run for rows in counts for run in measure(rows, rounds)]
    return {"machine": machine, "rounds": rounds, "target_mb": TARGET_MB, "runs": runs}


def markdown(report: dict) -> str:
    """The README's table: a line per manifest, case and processes."""
    lines = [
        "| rows | rejected as | processes | peak RSS, tree | largest process | rows alone"
        " (floor) | over the floor | time |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for run in report["runs"]:
        lines.append(
            f"| {run['rows']:,} | {run['case']} | {run['processes']} | "
            f"{run['peak_rss_tree_mb']:,.0f} MB | {run['peak_rss_process_mb']:,.0f} MB | "
            f"{run['rows_floor_mb']:,.0f} MB | {run['over_floor_mb']:,.0f} MB | "
            f"{run['seconds']:.1f} s |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["floor"]:
        floor(sys.argv[2])
        sys.exit()
    args = sys.argv[1:]
    rounds = 3
    if args[:1] == ["--rounds"]:
        rounds, args = int(args[1]), args[2:]
    report = main([int(n) for n in args] or [1_000_000], rounds)
    print(markdown(report))
    for run in report["runs"]:
        mark = "ok" if run["peak_rss_tree_mb"] <= TARGET_MB else "MISS"
        print(
            f"{mark} {run['rows']:,} {run['case']} rows, {run['processes']}: peak"
            f" {run['peak_rss_tree_mb']} MB (target ≤ {TARGET_MB}; the rows alone"
            f" {run['rows_floor_mb']} MB)"
        )
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "error-memory.json").write_text(json.dumps(report, indent=2) + "\n")
