"""The converter beside its peers, on one corpus, in one sitting: `make bench` (N=2000) or
`python benchmarks/bench.py 20000`.

Each run is a whole process (start-up included) measured by measure.py. Every run is repeated
(BENCH_REPEATS, default 3) in rounds, all runs once per round, so a slow spell of a shared
machine hits every run alike; a run's figure is its median. Writes
benchmarks/results/bench-N.json (with every sample) and bench-N.png (a bar chart of images/s)
and prints the ratios against their targets; `bench.py --table` prints the README's table from
the result files.
"""

import compileall
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

from charts import bar_chart
from corpus import make_corpus
from measure import run_measured

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
CLI = str(Path(PYTHON).parent / "tfrecord-pipeline")
CONVERT = ["--num_shards", "8", "--no_progress"]
# A worker is one core's worth: one shard-writer process with one image thread.
ONE_WORKER = ["--processes", "1", "--threads", "1"]
TWO_WORKERS = ["--processes", "2", "--threads", "1"]
RESIZE = ["--resize_short_side", "256", "--jpeg_quality", "90"]


def converter(*flags: str):
    """The converter's command, given the manifest and output, with `flags` after CONVERT's."""
    return lambda m, o: [CLI, "convert", "--manifest", m, "--output", o, *CONVERT, *flags]


# name → (command after the manifest and output are known)
RUNS = {
    "1 copy floor": lambda m, o: [PYTHON, str(HERE / "peers.py"), "copy", m, o],
    "2 TF loop": lambda m, o: [PYTHON, str(HERE / "peers.py"), "tf_loop", m, o],
    "3 Beam tutorial": lambda m, o: [PYTHON, str(HERE / "peers.py"), "beam_tutorial", m, o],
    "4 Pillow resize": lambda m, o: [PYTHON, str(HERE / "peers.py"), "pillow_resize", m, o],
    "4 turbo + vips resize": lambda m, o: [PYTHON, str(HERE / "peers.py"), "turbo_vips", m, o],
    "5 Pillow validate": lambda m, o: [PYTHON, str(HERE / "peers.py"), "pillow_validate", m, o],
    "5 validation floor": lambda m, o: [PYTHON, str(HERE / "peers.py"), "validation_floor", m, o],
    "6 converter": converter(),
    "7 full, 1 worker": converter("--validate", "full", *ONE_WORKER),
    "7 full, 2 workers": converter("--validate", "full", *TWO_WORKERS),
    "8 resize, 1 worker": converter(*RESIZE, *ONE_WORKER),
    "8 resize, 2 workers": converter(*RESIZE, *TWO_WORKERS),
}

# (label, numerator run, denominator run, target)
TARGETS = (
    ("converter / copy floor", "6 converter", "1 copy floor", 0.75),
    ("converter / TF loop", "6 converter", "2 TF loop", 1.5),
    ("converter / Beam tutorial", "6 converter", "3 Beam tutorial", 10.0),
    ("full validate 1 worker / Pillow validate", "7 full, 1 worker", "5 Pillow validate", 1.25),
    # Not the converter: the most any full validation can reach against the same loop.
    ("validation floor / Pillow validate", "5 validation floor", "5 Pillow validate", 1.25),
    ("full validate 2 workers / Pillow validate", "7 full, 2 workers", "5 Pillow validate", 1.0),
    ("full validate 2 workers / 1 worker", "7 full, 2 workers", "7 full, 1 worker", 1.0),
    ("resize 1 worker / Pillow resize", "8 resize, 1 worker", "4 Pillow resize", 1.1),
    ("resize 1 worker / turbo + vips resize", "8 resize, 1 worker", "4 turbo + vips resize", 0.95),
    ("resize 2 workers / Pillow resize", "8 resize, 2 workers", "4 Pillow resize", 1.7),
)


def summarise(samples: list[dict], count: int) -> dict:
    """One run's figure from its repeats: median time, highest peak memory, every sample."""
    seconds = statistics.median(sample["seconds"] for sample in samples)
    return {
        "seconds": seconds,
        "images_per_s": round(count / seconds, 1),
        "peak_rss_tree_mb": max(sample["peak_rss_tree_mb"] for sample in samples),
        "peak_rss_process_mb": max(sample["peak_rss_process_mb"] for sample in samples),
        "samples_s": [sample["seconds"] for sample in samples],
    }


def run_all(count: int, repeats: int) -> dict:
    corpus_root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    for package in ("pipeline", "transforms"):  # compiled as `pip install` would: with
        # PYTHONDONTWRITEBYTECODE set, an editable checkout recompiles every module per process
        compileall.compile_dir(str(HERE.parent / package), quiet=1)
    manifest = str(make_corpus(corpus_root / f"tfrp-corpus-{count}", count))
    samples: dict[str, list[dict]] = {name: [] for name in RUNS}
    for round_number in range(1, repeats + 1):
        for name, command in RUNS.items():
            with tempfile.TemporaryDirectory() as out:
                measured = run_measured(command(manifest, str(Path(out) / "o")))
            samples[name].append(measured)
            print(
                f"round {round_number}  {name:22s} {count / measured['seconds']:9.1f} img/s  "
                f"{measured['peak_rss_tree_mb']:7.1f} MB",
                flush=True,
            )
    results = {name: summarise(runs, count) for name, runs in samples.items()}
    ratios = [
        {
            "ratio": label,
            "value": round(results[a]["images_per_s"] / results[b]["images_per_s"], 2),
            "target": target,
        }
        for label, a, b, target in TARGETS
    ]
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {
        "images": count,
        "machine": machine,
        "repeats": repeats,
        "runs": results,
        "ratios": ratios,
    }


def write_chart(report: dict, path: Path) -> None:
    """images/s per run; the converter's runs in blue."""
    bars = [(name, result["images_per_s"]) for name, result in report["runs"].items()]
    title = f"images/s, {report['images']:,} images, {report['machine']}"
    path.write_bytes(bar_chart(bars, title, lambda name: "converter" in name or "worker" in name))


def markdown_table(reports: list[dict]) -> str:
    """The README's table: images/s and peak RSS per run and corpus size, then the ratios."""
    sizes = [f"{r['images']:,}" for r in reports]
    head = "| run | " + " | ".join(f"img/s ({n})" for n in sizes)
    head += " | " + " | ".join(f"peak RSS ({n})" for n in sizes) + " |"
    lines = [head, "|---" + "|---:" * (2 * len(reports)) + "|"]
    for name in reports[0]["runs"]:
        speeds = [f"{r['runs'][name]['images_per_s']:,.0f}" for r in reports]
        memory = [f"{r['runs'][name]['peak_rss_tree_mb']:,.0f} MB" for r in reports]
        lines.append(f"| {name} | " + " | ".join(speeds + memory) + " |")
    lines += [
        "",
        "| ratio | " + " | ".join(sizes) + " | target |",
        "|---" + "|---:" * (len(reports) + 1) + "|",
    ]
    for index, ratio in enumerate(reports[0]["ratios"]):
        values = [f"{r['ratios'][index]['value']:.2f}" for r in reports]
        lines.append(f"| {ratio['ratio']} | " + " | ".join(values) + f" | ≥ {ratio['target']} |")
    return "\n".join(lines + [""] + memory_lines(reports))


def memory_lines(reports: list[dict]) -> list[str]:
    """Run 6's memory targets: growth from the smallest to the largest corpus, biggest process."""
    converter = [r["runs"]["6 converter"] for r in reports]
    biggest = max(run["peak_rss_process_mb"] for run in converter)
    lines = [f"- converter, largest single process: {biggest:,.0f} MB (target ≤ 250 MB)"]
    if len(reports) > 1:
        growth = converter[-1]["peak_rss_tree_mb"] / converter[0]["peak_rss_tree_mb"]
        lines.append(
            f"- converter peak RSS, {reports[-1]['images']:,} vs {reports[0]['images']:,} "
            f"images: {growth:.2f}x (target ≤ 1.2x)"
        )
    return lines


if __name__ == "__main__":
    if sys.argv[1:] == ["--table"]:
        files = sorted((HERE / "results").glob("bench-*.json"), key=lambda p: int(p.stem[6:]))
        print(markdown_table([json.loads(path.read_text()) for path in files]))
        sys.exit(0)
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    report = run_all(count, int(os.environ.get("BENCH_REPEATS", "3")))
    for name, result in report["runs"].items():
        print(
            f"{name:22s} {result['images_per_s']:9.1f} img/s (median)  "
            f"{result['peak_rss_tree_mb']:7.1f} MB",
            flush=True,
        )
    for ratio in report["ratios"]:
        mark = "ok " if ratio["value"] >= ratio["target"] else "MISS"
        print(f"{mark} {ratio['ratio']:45s} {ratio['value']:6.2f}  (target {ratio['target']})")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / f"bench-{count}.json").write_text(json.dumps(report, indent=2) + "\n")
    write_chart(report, results / f"bench-{count}.png")
    print(f"wrote {results}/bench-{count}.json and .png")
