"""Many tiny images on one machine: images/s and peak memory as the rows grow.

`python benchmarks/many_rows.py 100000 1000000` converts, for each count N, a manifest of N rows
(unique keys) over four tiny JPEGs (~665 bytes each, the size of an MNIST- or CIFAR-like
thumbnail) with the local runner twice: with its default processes (every core) and with
`--processes 1`. Each run is measured whole by measure.py (wall time with start-up, peak RSS
of the process tree and of its largest process). The targets: peak RSS at the largest N at most
TARGET_RSS_RATIO times that at the smallest (rows are spilled to disk, not held), and the
default processes at least TARGET_SPEEDUP times as fast as one (a shard of tiny images is
written in pieces by every core). Writes benchmarks/results/many-rows.json.
"""

import csv
import io
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

from measure import run_measured
from PIL import Image

HERE = Path(__file__).resolve().parent
PHOTOS = HERE.parent / "sample" / "photos"
CLI = str(Path(sys.executable).parent / "tfrecord-pipeline")
TARGET_RSS_RATIO = 1.3
TARGET_SPEEDUP = 1.6
RUNS = {"every core": [], "1 process": ["--processes", "1"]}


def tiny_jpeg(photo: Path) -> bytes:
    """The photo as a 20x20 JPEG: ~665 bytes."""
    data = io.BytesIO()
    Image.open(photo).convert("RGB").resize((20, 20)).save(data, "JPEG", quality=75)
    return data.getvalue()


def make_manifest(out: Path, count: int) -> Path:
    """out/images/<label>.jpg, one tiny JPEG a label, and out/manifest.csv: `count` rows over
    them, each with a key of its own."""
    manifest = out / "manifest.csv"
    if manifest.exists() and manifest.stat().st_size and _rows(manifest) == count:
        return manifest
    (out / "images").mkdir(parents=True, exist_ok=True)
    labels = sorted(photo.stem for photo in PHOTOS.glob("*.*g"))
    for photo in sorted(PHOTOS.glob("*.*g")):
        (out / "images" / f"{photo.stem}.jpg").write_bytes(tiny_jpeg(photo))
    with open(manifest, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image_uri", "label", "key"])
        for index in range(count):
            label = labels[index % len(labels)]
            writer.writerow([f"images/{label}.jpg", label, f"{label}/{index:08d}"])
    return manifest


def _rows(manifest: Path) -> int:
    with open(manifest, "rb") as handle:
        return sum(1 for _ in handle) - 1


def convert(manifest: Path, flags: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as out:
        command = [CLI, "convert", "--manifest", str(manifest), "--output", out, "--no_progress"]
        result = run_measured([*command, *flags])
        (info,) = Path(out).rglob("tfrecord_pipeline.json")  # in the published version
        records = json.loads(info.read_text())["records"]
    if records != _rows(manifest):
        raise SystemExit(f"{records} records of {_rows(manifest)} rows")
    return result


def main(counts: list[int], repeats: int) -> dict:
    root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    sizes = {}
    for count in counts:
        manifest = make_manifest(root / f"tfrp-tiny-{count}", count)
        for name, flags in RUNS.items():
            rounds = [convert(manifest, flags) for _ in range(repeats)]
            seconds = statistics.median(r["seconds"] for r in rounds)
            sizes[f"{name}, {count}"] = {
                "images": count,
                "seconds": seconds,
                "images_per_s": round(count / seconds),
                "peak_rss_mb": max(r["peak_rss_tree_mb"] for r in rounds),
                "largest_process_mb": max(r["peak_rss_process_mb"] for r in rounds),
                "samples_s": [r["seconds"] for r in rounds],
            }
            print(json.dumps({name: sizes[f"{name}, {count}"]}), flush=True)
    low, high = min(counts), max(counts)

    def rss(count: int) -> float:
        return sizes[f"every core, {count}"]["peak_rss_mb"]

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {
        "machine": machine,
        "image_bytes": len(tiny_jpeg(sorted(PHOTOS.glob("*.*g"))[0])),
        "repeats": repeats,
        "runs": sizes,
        "rss_ratio": round(rss(high) / rss(low), 2),
        "target_rss_ratio": TARGET_RSS_RATIO,
        "speedup": {
            count: round(
                sizes[f"1 process, {count}"]["seconds"] / sizes[f"every core, {count}"]["seconds"],
                2,
            )
            for count in counts
        },
        "target_speedup": TARGET_SPEEDUP,
    }


if __name__ == "__main__":
    counts = [int(n) for n in sys.argv[1:]] or [100_000, 1_000_000]
    report = main(counts, int(os.environ.get("BENCH_REPEATS", "3")))
    print(f"peak RSS {max(counts)} / {min(counts)} rows: {report['rss_ratio']}x (target ≤ 1.3)")
    print(f"every core / 1 process: {report['speedup']} (target ≥ {TARGET_SPEEDUP})")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "many-rows.json").write_text(json.dumps(report, indent=2) + "\n")
