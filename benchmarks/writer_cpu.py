"""CPU per image of the Beam pipeline's shard-writer path against the local runner's writer, on
one corpus: `python benchmarks/writer_cpu.py 10000 [converter flags]`, e.g. `... 2000
--resize_short_side 256 --jpeg_quality 90` for re-encoding runs.

Each run is a whole `tfrecord-pipeline convert` with one shard writer (the local runner's
`--processes 1`; Beam's write step writes one shard at a time), and its CPU time is the user +
system time of its process tree: the launcher, Beam's job server and SDK harness processes,
every one waited for by its parent and so
counted in getrusage(RUSAGE_CHILDREN) when the run ends. Per image: the difference between a
run over the whole corpus and one over its first fifth, divided by the images between them.
Start-up (imports, Beam's job server and harness, translating the graph) is the same in both
and cancels out; every cost that grows with the images stays: the writer's, and whatever Beam
adds per row anywhere in the pipeline (coding rows between steps and over the Fn API, the
shuffle, side inputs, bundles). So the Beam figure charges its write path with the pipeline's
other per-row costs too, and the ratio is a bound the write step alone can only beat.

Why not time `_WriteShardFn` called directly: it hands each shard to the same shard writer the
local runner's workers call, so the ratio would be 1.0 by construction and nothing the engine does
around the step would count.

Runs: the local runner; the DirectRunner (Beam's FnApiRunner in this process); the portable
runner with an embedded job server and its SDK harness in a process of its own (the shape of
a Dataflow Runner v2 worker). Rounds run every engine at both sizes, so a slow spell of a
shared machine hits them alike; each figure is the median over rounds. Writes
benchmarks/results/writer-cpu-N[-flags].json.
"""

import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from corpus import make_corpus

from tfrecord_pipeline.dataset.versions import resolve

HERE = Path(__file__).resolve().parent
CLI = str(Path(sys.executable).parent / "tfrecord-pipeline")
CONVERT = ["--num_shards", "8", "--no_progress"]
ENGINES = {
    "local": ["--processes", "1"],
    "DirectRunner": ["--runner", "DirectRunner"],
    "PortableRunner": shlex.split(
        "--runner PortableRunner --job_endpoint embed --environment_type LOOPBACK"
        " --experiments use_loopback_process_worker"
    ),
}
TARGET = 0.8  # the local runner's CPU per image over the Beam path's, at least
SMALL_SHARE = 5  # the small run converts the first 1/SMALL_SHARE of the corpus


def prefix_manifest(manifest: Path, rows: int) -> Path:
    """The corpus manifest's first `rows` rows, beside it (image paths stay relative)."""
    lines = manifest.read_text().splitlines(keepends=True)
    path = manifest.with_name(f"manifest-{rows}.csv")
    path.write_text("".join(lines[: rows + 1]))
    return path


def tree_cpu(command: list[str], env: dict) -> tuple[float, float]:
    """(CPU seconds of the command's whole process tree, wall seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.monotonic() - start
    if done.returncode:
        raise RuntimeError(f"{command[:3]} failed: {done.stderr.decode()[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def records_of(root: Path) -> int:
    """The records of the version the run published, read from its metadata."""
    return json.loads(resolve(str(root)).info_text)["records"]


def convert_cpu(manifest: Path, images: int, flags: list[str], env: dict) -> dict:
    with tempfile.TemporaryDirectory() as out:
        root = Path(out) / "dataset"
        command = [CLI, "convert", "--manifest", str(manifest), "--output", str(root)]
        cpu, wall = tree_cpu([*command, *CONVERT, *flags], env)
        if records_of(root) != images:
            raise RuntimeError(f"{flags[:2]}: {records_of(root)} records of {images} images")
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}


def one_engine(manifests: dict, sizes: dict, flags: list[str], env: dict) -> dict:
    """Both sizes converted on one engine, and the CPU per image between them (us)."""
    runs = {size: convert_cpu(manifests[size], sizes[size], flags, env) for size in sizes}
    extra_cpu = runs["large"]["cpu_s"] - runs["small"]["cpu_s"]
    runs["us_per_image"] = round(extra_cpu / (sizes["large"] - sizes["small"]) * 1e6, 1)
    return runs


def main(count: int, repeats: int, flags: tuple[str, ...] = ()) -> dict:
    corpus_root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    manifest = make_corpus(corpus_root / f"tfrp-corpus-{count}", count)
    sizes = {"small": max(1, count // SMALL_SHARE), "large": count}  # images
    manifests = {"small": prefix_manifest(manifest, sizes["small"]), "large": manifest}
    # The SDK harness of the portable runner is `python` from PATH: this interpreter's.
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(CLI).parent), os.environ["PATH"]])}
    samples = {name: [] for name in ENGINES}
    for number in range(1, repeats + 1):
        for name, engine in ENGINES.items():
            runs = one_engine(manifests, sizes, [*flags, *engine], env)
            samples[name].append(runs)
            print(
                f"round {number}  {name:15s} {runs['us_per_image']:8.1f} us/image  "
                f"(cpu {runs['small']['cpu_s']:.2f} s at {sizes['small']:,}, "
                f"{runs['large']['cpu_s']:.2f} s at {count:,})",
                flush=True,
            )
    engines = {
        name: {
            "us_per_image": statistics.median(run["us_per_image"] for run in runs),
            "small_run_cpu_s": statistics.median(run["small"]["cpu_s"] for run in runs),
            "samples": runs,
        }
        for name, runs in samples.items()
    }
    return summarise(count, sizes, repeats, engines, flags)


def summarise(count: int, sizes: dict, repeats: int, engines: dict, flags=()) -> dict:
    """The figures: each engine's median CPU per image and the local runner's over it, as
    medians and round by round (a round's runs are the closest in time)."""
    local = engines["local"]
    beam = {name: engine for name, engine in engines.items() if name != "local"}
    ratios = {name: round(local["us_per_image"] / e["us_per_image"], 2) for name, e in beam.items()}
    rounds = {
        name: [
            round(ours["us_per_image"] / theirs["us_per_image"], 2)
            for ours, theirs in zip(local["samples"], engine["samples"], strict=True)
        ]
        for name, engine in beam.items()
    }
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {
        "images": count,
        "sizes": sizes,
        "flags": [*CONVERT, *flags],
        "machine": machine,
        "repeats": repeats,
        "engines": engines,
        "local_over_beam": ratios,
        "local_over_beam_by_round": rounds,
        "target": TARGET,
    }


if __name__ == "__main__":
    images = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    extra = tuple(sys.argv[2:])
    report = main(images, int(os.environ.get("BENCH_REPEATS", "3")), extra)
    for name, engine in report["engines"].items():
        print(f"{name:15s} {engine['us_per_image']:8.1f} us/image (median)")
    for name, ratio in report["local_over_beam"].items():
        mark = "ok " if ratio >= TARGET else "MISS"
        print(f"{mark} CPU per image, local writer / {name}: {ratio:.2f} (target {TARGET})")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    name = "-".join([f"writer-cpu-{images}", *(flag.strip("-") for flag in extra)])
    (results / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {results}/{name}.json")
