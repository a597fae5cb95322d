"""A nightly refresh against a full conversion, in one sitting: `python benchmarks/refresh.py
20000 [converter flags]`, e.g. `... 20000 --resize_short_side 256` for re-encoding runs.

The refresh is `convert --incremental` over the whole corpus into a dataset whose published
version holds all but the last 1% of its rows (made before the clock starts, every round); the
full conversion is the same command without `--incremental` into an empty folder. The floor is
what no refresh can do without, and nothing else, in a bare Python process (benchmarks/peers.py
`refresh_floor`): read the manifest, stat every image (the least that sees an image change
without reading it) and read the published version's rows files (what its records were made
from). Each run is a whole process measured by measure.py, started with no earlier run's writes
pending (`sync`), rounds alternate the three, and each figure is a median. Each round also
times the check a refresh makes of the published shards before it carries them (every byte
read and its CRC-32C computed, in this process: on a local disk; on Cloud Storage the objects'
listing answers it, no byte read), and the report prints the figures measured before shards
were checked and copied beside its own (BEFORE). Writes
benchmarks/results/refresh-N[-flags].json.
"""

import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from corpus import make_corpus
from measure import run_measured

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from tfrecord_pipeline.transforms.storage.file_checks import stored_checksum  # noqa: E402

CLI = str(Path(sys.executable).parent / "tfrecord-pipeline")
PEERS = HERE / "peers.py"
CONVERT = ["--num_shards", "8", "--no_progress"]
ADDED = 0.01  # the share of rows the refresh finds new
TARGET = 0.10  # the refresh's time as a share of the full conversion's, at most
# refresh / full measured before shards were checked and copied (hard links, unchecked):
# 2026-11-24, 20,000 images, pass-through and `--resize_short_side 256 --jpeg_quality 90`.
BEFORE = {"pass-through": 0.284, "re-encoding": 0.023}


def older_manifest(manifest: Path, out: Path) -> Path:
    """The manifest of the night before: every row but the last ADDED share."""
    with open(manifest, newline="") as handle:
        rows = list(csv.DictReader(handle))
    kept = rows[: len(rows) - max(1, round(len(rows) * ADDED))]
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(kept)
    return out


def convert(manifest: Path, root: Path, *flags: str) -> list[str]:
    return [CLI, "convert", "--manifest", str(manifest), "--output", str(root), *CONVERT, *flags]


def check_seconds(root: Path) -> float:
    """Seconds to check every shard of the published version (`stored_checksum`)."""
    version = root / "versions" / json.loads((root / "LATEST").read_text())["version"]
    start = time.perf_counter()
    for shard in version.glob("*.tfrecord*"):
        stored_checksum(str(shard))
    return time.perf_counter() - start


def one_round(manifest: Path, older: Path, flags: list[str]) -> tuple[dict, dict, dict, float]:
    """(full conversion, refresh, floor), each measured as a whole process, and the check."""
    with tempfile.TemporaryDirectory() as out:
        os.sync()  # each run starts with no other run's writes pending: their flushes are its
        full = run_measured(convert(manifest, Path(out) / "full", *flags))
        root = Path(out) / "nightly"
        subprocess.run(convert(older, root, *flags), check=True, stdout=subprocess.DEVNULL)
        os.sync()  # a nightly refresh finds its published version on the disk for hours
        least = run_measured(
            [sys.executable, str(PEERS), "refresh_floor", str(manifest), str(root)]
        )
        check = check_seconds(root)
        refresh = run_measured(convert(manifest, root, *flags, "--incremental"))
    return full, refresh, least, check


def main(count: int, repeats: int, flags: list[str]) -> dict:
    corpus_root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    manifest = make_corpus(corpus_root / f"tfrp-corpus-{count}", count)
    older = older_manifest(manifest, manifest.with_name("manifest-older.csv"))
    fulls, refreshes, floors, checks = [], [], [], []
    for number in range(1, repeats + 1):
        full, refresh, least, check = one_round(manifest, older, flags)
        checks.append(check)
        fulls.append(full["seconds"])
        refreshes.append(refresh["seconds"])
        floors.append(least["seconds"])
        print(
            f"round {number}: full {full['seconds']:.2f} s, refresh {refresh['seconds']:.2f} s, "
            f"floor {least['seconds']:.2f} s, check {check:.3f} s"
        )
    ratio = statistics.median(refreshes) / statistics.median(fulls)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {
        "images": count,
        "added_rows": ADDED,
        "flags": [*CONVERT, *flags],
        "machine": machine,
        "full_s": statistics.median(fulls),
        "refresh_s": statistics.median(refreshes),
        "refresh_over_full": round(ratio, 3),
        "target": TARGET,
        "floor_s": statistics.median(floors),
        "floor_over_full": round(statistics.median(floors) / statistics.median(fulls), 3),
        "check_s": statistics.median(checks),
        "before": BEFORE["re-encoding" if flags else "pass-through"],
        "samples": {"full_s": fulls, "refresh_s": refreshes, "floor_s": floors, "check_s": checks},
    }


if __name__ == "__main__":
    images = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    extra = sys.argv[2:]
    report = main(images, int(os.environ.get("BENCH_REPEATS", "3")), extra)
    mark = "ok" if report["refresh_over_full"] <= TARGET else "MISS"
    print(
        f"{mark} refresh / full conversion: {report['refresh_over_full']:.3f} (target ≤ {TARGET}, "
        f"{report['before']} before shards were checked and copied)"
    )
    print(f"the check of the published shards: {report['check_s']:.3f} s")
    print(f"floor / full conversion: {report['floor_over_full']:.3f}")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    name = "-".join([f"refresh-{images}", *(flag.strip("-") for flag in extra)])
    (results / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
