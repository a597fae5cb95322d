"""Many tiny images on one machine: images/s and peak memory as the rows grow.

`python benchmarks/many_rows.py 100000 1000000` converts, for each count N, a manifest of N rows
(unique keys) over four tiny JPEGs (~665 bytes each, the size of an MNIST- or CIFAR-like
thumbnail) with the local runner twice: with its default processes (every core) and with
`--processes 1`. With every core it also measures `--incremental`, the refresh of a version of
that manifest by one where ~1% of the rows changed, were added or removed (that version is
written first, unmeasured), and `--dedup` over N rows of images of their own (a comment in each
JPEG tells them apart), every DUPLICATE_EVERY-th a copy of the one before: the two steps where
rows must meet (by key, by digest). Each run is measured whole by measure.py (wall time with
start-up, peak RSS of the process tree and of its largest process). The targets: peak RSS at the
largest N at most TARGET_RSS_RATIO times that at the smallest, for every run with every core
(rows are spilled to disk, not held), and the default processes at least TARGET_SPEEDUP times as
fast as one (a shard of tiny images is written in pieces by every core). Writes
benchmarks/results/many-rows.json.
"""

import csv
import functools
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

from tfrecord_pipeline.dataset.metadata import INFO_FILE
from tfrecord_pipeline.dataset.versions import resolve

HERE = Path(__file__).resolve().parent
PHOTOS = HERE.parent / "sample" / "photos"
CLI = str(Path(sys.executable).parent / "tfrecord-pipeline")
TARGET_RSS_RATIO = 1.3
TARGET_SPEEDUP = 1.6
RUNS = {"every core": [], "1 process": ["--processes", "1"]}
MEETING = ("incremental", "dedup")  # runs with every core where rows meet: by key, by digest
CHANGED_EVERY = 300  # of the refresh's rows, one in this many changed, one removed, one added
DUPLICATE_EVERY = 200  # of --dedup's rows, one in this many is a copy of the one before


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


def with_comment(jpeg: bytes, text: str) -> bytes:
    """The JPEG with a comment segment after its start marker: other bytes, the same image."""
    comment = text.encode()
    return jpeg[:2] + b"\xff\xfe" + (len(comment) + 2).to_bytes(2, "big") + comment + jpeg[2:]


def make_unique_manifest(out: Path, count: int) -> Path:
    """out/manifest.csv: `count` rows, each over a tiny JPEG of its own under out/images/ but
    every DUPLICATE_EVERY-th, whose image has the bytes of the one before it."""
    manifest = out / "manifest.csv"
    if manifest.exists() and manifest.stat().st_size and _rows(manifest) == count:
        return manifest
    out.mkdir(parents=True, exist_ok=True)
    jpegs = {photo.stem: tiny_jpeg(photo) for photo in sorted(PHOTOS.glob("*.*g"))}
    labels = sorted(jpegs)
    with open(manifest.with_suffix(".tmp"), "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image_uri", "label", "key"])
        for index in range(count):
            label = labels[index % len(labels)]
            image = Path("images", f"{index // 1000:04d}", f"{index:08d}.jpg")
            (out / image).parent.mkdir(parents=True, exist_ok=True)
            like = index - (index % DUPLICATE_EVERY == DUPLICATE_EVERY - 1)  # itself, or a copy
            jpeg = with_comment(jpegs[labels[like % len(labels)]], str(like))
            (out / image).write_bytes(jpeg)
            writer.writerow([str(image), label, f"{label}/{index:08d}"])
    return manifest.with_suffix(".tmp").replace(manifest)


def changed_manifest(manifest: Path, out: Path) -> tuple[Path, int]:
    """`manifest` a night later, at `out`: of every CHANGED_EVERY rows, one relabelled, one
    removed and one added; with the records its version holds."""
    with open(manifest, newline="") as handle:
        rows = list(csv.DictReader(handle))
    labels = sorted({row["label"] for row in rows})
    changed = []
    for index, row in enumerate(rows):
        step = index % CHANGED_EVERY
        if step == 1:
            continue
        if step == 0:
            row = {**row, "label": labels[(labels.index(row["label"]) + 1) % len(labels)]}
            changed.append({**row, "key": f"added/{index:08d}"})
        changed.append(row)
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(changed)
    return out, len(changed)


def command(manifest: Path, out: str, flags: list[str]) -> list[str]:
    return [CLI, "convert", "--manifest", str(manifest), "--output", out, "--no_progress", *flags]


def published_records(out: str) -> int:
    return json.loads((Path(resolve(out).folder) / INFO_FILE).read_text())["records"]


def convert(manifest: Path, flags: list[str], records: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        result = run_measured(command(manifest, out, flags))
        published = published_records(out)
    if published != records:
        raise SystemExit(f"{published} records of {records} expected")
    return result


def refresh(manifest: Path, changed: Path, records: int) -> dict:
    """`--incremental` by `changed` of the version of `manifest` (written first, unmeasured)."""
    with tempfile.TemporaryDirectory() as out:
        run_measured(command(manifest, out, []))
        result = run_measured(command(changed, out, ["--incremental"]))
        published = published_records(out)
    if published != records:
        raise SystemExit(f"{published} records refreshed of {records} expected")
    return result


def measured(rounds: list[dict], count: int) -> dict:
    seconds = statistics.median(r["seconds"] for r in rounds)
    return {
        "images": count,
        "seconds": seconds,
        "images_per_s": round(count / seconds),
        "peak_rss_mb": max(r["peak_rss_tree_mb"] for r in rounds),
        "largest_process_mb": max(r["peak_rss_process_mb"] for r in rounds),
        "samples_s": [r["seconds"] for r in rounds],
    }


def main(counts: list[int], repeats: int) -> dict:
    root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    sizes = {}
    for count in counts:
        folder = root / f"tfrp-tiny-{count}"
        manifest = make_manifest(folder, count)
        changed, refreshed = changed_manifest(manifest, folder / "changed.csv")
        unique = make_unique_manifest(root / f"tfrp-tiny-unique-{count}", count)
        calls = {
            name: functools.partial(convert, manifest, flags, count) for name, flags in RUNS.items()
        }
        calls["incremental"] = functools.partial(refresh, manifest, changed, refreshed)
        deduplicated = count - count // DUPLICATE_EVERY
        calls["dedup"] = functools.partial(convert, unique, ["--dedup"], deduplicated)
        for name, call in calls.items():
            sizes[f"{name}, {count}"] = measured([call() for _ in range(repeats)], count)
            print(json.dumps({name: sizes[f"{name}, {count}"]}), flush=True)
    low, high = min(counts), max(counts)

    def rss_ratio(name: str) -> float:
        peaks = [sizes[f"{name}, {count}"]["peak_rss_mb"] for count in (high, low)]
        return round(peaks[0] / peaks[1], 2)

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {
        "machine": machine,
        "image_bytes": len(tiny_jpeg(sorted(PHOTOS.glob("*.*g"))[0])),
        "repeats": repeats,
        "runs": sizes,
        "rss_ratio": {name: rss_ratio(name) for name in ("every core", *MEETING)},
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
    for name, ratio in report["rss_ratio"].items():
        print(f"{name}: peak RSS {max(counts)} / {min(counts)} rows: {ratio}x (target ≤ 1.3)")
    print(f"every core / 1 process: {report['speedup']} (target ≥ {TARGET_SPEEDUP})")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "many-rows.json").write_text(json.dumps(report, indent=2) + "\n")
