"""The converter beside its peers, on one corpus, in one sitting: `make bench` (N=2000) or
`python benchmarks/bench.py 20000`, or only some runs: `BENCH_RUNS="6 converter,5 checked floor"
python benchmarks/bench.py 200000` (written to results/subset-N.json).

Each run is a whole process (start-up included) measured by measure.py. Every run is repeated
(BENCH_REPEATS, default 3) in rounds, all runs once per round, so a slow spell of a shared
machine hits every run alike; a run's figure is its median. A run that writes a dataset is
read back: one record (sample) an image, or the sitting stops. Runs 9 are the peers users pick
instead: a TFDS builder, and Ray Data, LitData and MosaicML Streaming, which the project never
installs: `make bench-peers` makes their environment (.venv-peers) and runs the sitting;
without it those runs are reported as skipped, with the reason. The converter's and the
peers' runs also time their start-up alone (the converter's `--version`, a peer's imports) in
the same round: a run's conversion time is its whole time less that. Writes
benchmarks/results/bench-N.json (with every sample) and bench-N.png (a bar chart of images/s)
and prints the ratios against their targets; `bench.py --table` prints the README's table from
the result files. BENCH_RUNS (names, comma-separated) runs only those, into subset-N.json.
"""

import compileall
import json
import os
import platform
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from bench_report import CONVERSION, markdown_table, print_report, write_chart
from corpus import make_corpus
from measure import run_measured
from streaming_peers import indexed

from tfrecord_pipeline.transforms.tfrecord.records import read_records

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
CLI = str(Path(PYTHON).parent / "tfrecord-pipeline")
CONVERT = ["--num_shards", "8", "--no_progress"]
# A worker is one core's worth: one shard-writer process with one image thread.
ONE_WORKER = ["--processes", "1", "--threads", "1"]
TWO_WORKERS = ["--processes", "2", "--threads", "1"]
RESIZE = ["--resize_short_side", "256", "--jpeg_quality", "90"]
PIXELS = "every JPEG's pixels, at full size"  # --validate pixels: what the "7 full" runs check
# Peers the project never installs (Ray): their own environment, made by `make bench-peers`.
PEERS_PYTHON = HERE.parent / ".venv-peers" / "bin" / "python"


class Run(NamedTuple):
    """A run's command, given the manifest and output folder; for a run that writes a dataset,
    what counts the records it holds, given its output folder: read back, one an image (a run
    that silently wrote nothing would look fast); the command that only starts up as the run
    does (None: not timed apart); and how much of each image the run checks."""

    command: Callable[[str, str], list[str]]
    records: Callable[[Path], int] | None = None
    startup: list[str] | None = None
    checks: str = "nothing"


def tfrecords(pattern: str) -> Callable[[Path], int]:
    """Counts the records of the TFRecord files under the output that match `pattern`."""
    return lambda out: records_in(out, pattern)


def samples(entries: str, count: str) -> Callable[[Path], int]:
    """Counts the samples the output's index.json lists (LitData's and MDS's datasets)."""
    return lambda out: indexed(out, entries, count)


def peer(
    name: str, records=None, python: Path = Path(PYTHON), imports: bool = False, checks="nothing"
) -> Run:
    """peers.py's peer `name`, run by `python`; with `imports`, its imports timed alone."""
    script = [str(python), str(HERE / "peers.py")]
    startup = [*script, "imports", name] if imports else None
    return Run(lambda m, o: [*script, name, m, o], records, startup, checks)


def converter(*flags: str, checks: str = "every JPEG's scans") -> Run:
    """The converter, with `flags` after CONVERT's."""
    return Run(
        lambda m, o: [CLI, "convert", "--manifest", m, "--output", o, *CONVERT, *flags],
        tfrecords("versions/*/*.tfrecord"),
        [CLI, "--version"],
        checks,
    )


RUNS = {
    "1 copy floor": peer("copy"),
    "2 TF loop": peer("tf_loop", tfrecords("*.tfrecord")),
    "3 Beam tutorial": peer("beam_tutorial", tfrecords("train-*")),
    "4 Pillow resize": peer("pillow_resize"),
    "4 turbo + vips resize": peer("turbo_vips"),
    "5 Pillow validate": peer("pillow_validate"),
    "5 validation floor": peer("validation_floor"),
    "5 checked floor": Run(
        lambda m, o: [PYTHON, str(HERE / "checked_floor.py"), m, o],
        tfrecords("*.tfrecord"),
        checks="every JPEG's scans",
    ),
    # The checked floor with the least of what the converter does beyond it: each scan's end
    # found, protobuf's own Example framed, its files kept on the disk (checked_floor.py).
    "5 kept floor": Run(
        lambda m, o: [PYTHON, str(HERE / "checked_floor.py"), m, o, "--kept"],
        tfrecords("*.tfrecord"),
        checks="every JPEG's scans",
    ),
    "6 converter": converter(),
    "6 markers": converter("--validate", "markers", checks="every JPEG's markers"),
    "7 full, 1 worker": converter("--validate", "pixels", *ONE_WORKER, checks=PIXELS),
    "7 full, 2 workers": converter("--validate", "pixels", *TWO_WORKERS, checks=PIXELS),
    "8 resize, 1 worker": converter(*RESIZE, *ONE_WORKER),
    "8 resize, 2 workers": converter(*RESIZE, *TWO_WORKERS),
    "9 TFDS builder": peer("tfds_builder", tfrecords("*/*/*.tfrecord-*"), imports=True),
    # Every file: Ray 2.60 names its TFRecord files .tar, not the .tfrecords it documents.
    "9 Ray Data": peer("ray_data", tfrecords("*"), PEERS_PYTHON, imports=True),
    "9 LitData": peer(
        "litdata_optimize", samples("chunks", "chunk_size"), PEERS_PYTHON, imports=True
    ),
    "9 MDS": peer("mds_writer", samples("shards", "samples"), PEERS_PYTHON, imports=True),
}


class Target(NamedTuple):
    """A ratio of two runs' rates (whole runs', or CONVERSION) and the least it should be
    (None: reported, held to nothing)."""

    label: str
    a: str
    b: str
    target: float | None
    rate: str = "images_per_s"


TARGETS = tuple(
    Target(*target)
    for target in (
        ("converter / copy floor", "6 converter", "1 copy floor", 0.75),
        ("converter / checked floor", "6 converter", "5 checked floor", 0.85),
        ("converter / kept floor", "6 converter", "5 kept floor", None),
        ("kept floor / checked floor", "5 kept floor", "5 checked floor", None),
        ("converter / TF loop", "6 converter", "2 TF loop", 1.5),
        ("converter / Beam tutorial", "6 converter", "3 Beam tutorial", 10.0),
        ("full validate 1 worker / Pillow validate", "7 full, 1 worker", "5 Pillow validate", 1.25),
        # Not the converter: the most any full validation can reach against the same loop.
        ("validation floor / Pillow validate", "5 validation floor", "5 Pillow validate", 1.25),
        (
            "full validate 2 workers / Pillow validate",
            "7 full, 2 workers",
            "5 Pillow validate",
            1.0,
        ),
        ("full validate 2 workers / 1 worker", "7 full, 2 workers", "7 full, 1 worker", 1.0),
        ("resize 1 worker / Pillow resize", "8 resize, 1 worker", "4 Pillow resize", 1.1),
        (
            "resize 1 worker / turbo + vips resize",
            "8 resize, 1 worker",
            "4 turbo + vips resize",
            0.95,
        ),
        ("resize 2 workers / Pillow resize", "8 resize, 2 workers", "4 Pillow resize", 1.7),
        ("converter / TFDS builder", "6 converter", "9 TFDS builder", 1.0),
        ("converter / Ray Data", "6 converter", "9 Ray Data", 1.0),
        ("markers conversion / MDS conversion", "6 markers", "9 MDS", 1.0, CONVERSION),
        ("markers conversion / LitData conversion", "6 markers", "9 LitData", 1.0, CONVERSION),
        ("markers conversion / TFDS conversion", "6 markers", "9 TFDS builder", 1.0, CONVERSION),
    )
)


def summarise(samples: list[dict], count: int) -> dict:
    """One run's figure from its repeats: median time, highest peak memory, every sample; where
    its start-up was timed apart, the medians of that and of each round's time less it (every
    round's kept: `ratio` pairs them)."""
    seconds = statistics.median(sample["seconds"] for sample in samples)
    summary = {
        "seconds": seconds,
        "images_per_s": round(count / seconds, 1),
        "peak_rss_tree_mb": max(sample["peak_rss_tree_mb"] for sample in samples),
        "peak_rss_process_mb": max(sample["peak_rss_process_mb"] for sample in samples),
        "samples_s": [sample["seconds"] for sample in samples],
        # Each round's CPU time over the cores' time it ran: what waiting (a core without
        # work, the disk) cost it.
        "busy_samples": [busy(sample) for sample in samples],
    }
    if all("startup_s" in sample for sample in samples):
        rest = [max(sample["seconds"] - sample["startup_s"], 1e-3) for sample in samples]
        summary["startup_s"] = statistics.median(sample["startup_s"] for sample in samples)
        summary["conversion_s"] = round(statistics.median(rest), 3)
        summary["conversion_samples_s"] = rest
        summary[CONVERSION] = round(count / summary["conversion_s"], 1)
    return summary


def busy(sample: dict) -> float | None:
    """Of every core's time while the run ran, the share its processes were on one."""
    if "cpu_s" not in sample:
        return None
    return round(sample["cpu_s"] / (os.cpu_count() * sample["seconds"]), 3)


def skip_reason(run: Run) -> str | None:
    """Why a run cannot start on this machine: its interpreter is not installed."""
    program = Path(run.command("", "")[0])
    return None if program.exists() else f"{program} is missing (`make bench-peers` makes it)"


def records_in(out: Path, pattern: str) -> int:
    """Records in the files under `out` that match `pattern`, every frame's CRCs checked."""
    return sum(sum(1 for _ in read_records(path.read_bytes())) for path in out.glob(pattern))


def measure(run: Run, manifest: str, count: int) -> dict:
    """One whole run in a fresh output folder, then its start-up alone where it has one; a run
    that writes a dataset must have written `count` records, or the sitting stops. Each starts
    with nothing left to write back: a run that leaves its files in the page cache (the
    floors, the peers) would have the next one pay for writing them."""
    os.sync()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "o"
        measured = run_measured(run.command(manifest, str(out)))
        if run.records is not None and (found := run.records(out)) != count:
            raise RuntimeError(f"{run.command('', '')[:3]}: {found} records of {count} images")
    if run.startup:
        measured["startup_s"] = run_measured(run.startup)["seconds"]
    return measured


def ratio(results: dict, target: Target) -> float | None:
    """a's rate over b's, paired round by round: the median of each round's ratio of its two
    runs (a slow spell slows both runs of its round, and their ratio stands, where a ratio of
    medians would set a run's median from one spell against the other's from another); None
    when either was skipped or not run."""
    if any(name not in results or "skipped" in results[name] for name in (target.a, target.b)):
        return None
    times = "conversion_samples_s" if target.rate == CONVERSION else "samples_s"
    rounds = zip(results[target.a][times], results[target.b][times], strict=True)
    return round(statistics.median(b / a for a, b in rounds), 2)


def run_all(count: int, repeats: int) -> dict:
    """Every run (or those BENCH_RUNS names), round after round, and the ratios of those run."""
    corpus_root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    for package in ("pipeline", "transforms"):  # compiled as `pip install` would: with
        # PYTHONDONTWRITEBYTECODE set, an editable checkout recompiles every module per process
        compileall.compile_dir(str(HERE.parent / package), quiet=1)
    manifest = str(make_corpus(corpus_root / f"tfrp-corpus-{count}", count))
    only = os.environ.get("BENCH_RUNS")
    runs = {name: run for name, run in RUNS.items() if not only or name in only.split(",")}
    skipped = {name: reason for name, run in runs.items() if (reason := skip_reason(run))}
    samples: dict[str, list[dict]] = {name: [] for name in runs if name not in skipped}
    for round_number in range(1, repeats + 1):
        for name in samples:
            measured = measure(runs[name], manifest, count)
            samples[name].append(measured)
            print(
                f"round {round_number}  {name:22s} {count / measured['seconds']:9.1f} img/s  "
                f"{measured['peak_rss_tree_mb']:7.1f} MB  busy {busy(measured)}  "
                f"start-up {measured.get('startup_s')} s",
                flush=True,
            )
    results = {
        name: {"skipped": skipped[name]} if name in skipped else summarise(samples[name], count)
        for name in runs
    }
    for name in samples:
        results[name]["checks"] = runs[name].checks
    ratios = [
        {"ratio": target.label, "value": ratio(results, target), "target": target.target}
        for target in TARGETS
        if target.a in results and target.b in results
    ]
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {
        "images": count,
        "machine": machine,
        "repeats": repeats,
        "runs": results,
        "ratios": ratios,
    }


if __name__ == "__main__":
    if sys.argv[1:] == ["--table"]:
        files = sorted((HERE / "results").glob("bench-*.json"), key=lambda p: int(p.stem[6:]))
        print(markdown_table([json.loads(path.read_text()) for path in files]))
        sys.exit(0)
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    report = run_all(count, int(os.environ.get("BENCH_REPEATS", "3")))
    print_report(report)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    # Some of the runs (BENCH_RUNS) never replace a whole sitting's file, which the table reads.
    name = f"{'subset' if os.environ.get('BENCH_RUNS') else 'bench'}-{count}"
    (results / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    write_chart(report, results / f"{name}.png")
    print(f"wrote {results}/{name}.json and .png")
