"""What it costs to carry a refresh's unchanged shards into its new version, by how they are
carried, on the refresh benchmark's dataset: `python benchmarks/carry_costs.py 20000`.

The published version is the one benchmarks/refresh.py refreshes (the corpus but its last 1%,
`--num_shards 8`); each way of carrying its shards into a fresh folder on the same file system
is timed in this process, every round, medians reported:
- check: read every byte and compute the file's CRC-32C, as a refresh checks a shard against
  its metadata before carrying it (transforms/storage/file_checks.py `check_shards`);
- link: a hard link (what a refresh did before it checked: the versions shared the bytes);
- link_read_only_checked: the check, a hard link, and the file made read-only (which does not
  stop root, and makes the old version's file read-only too);
- copy_file_range_checked: the check, then the kernel's copy (a reflink where the file system
  has them), flushed to the disk (transforms/storage/disk.py `copy`);
- plain_copy_checked: the check, then a copy through this process, flushed.
Writes benchmarks/results/carry-costs-N.json.
"""

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from corpus import make_corpus
from refresh import HERE, convert, older_manifest

sys.path.insert(0, str(HERE.parent))
from tfrecord_pipeline.transforms.storage import disk  # noqa: E402
from tfrecord_pipeline.transforms.storage.file_checks import stored_checksum  # noqa: E402


def _plain_copy(source: str, destination: str) -> None:
    with open(source, "rb") as reader, open(destination, "wb") as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)
        writer.flush()
        os.fsync(writer.fileno())


def _linked_read_only(source: str, destination: str) -> None:
    os.link(source, destination)
    os.chmod(destination, 0o444)


WAYS = {
    "check": None,
    "link": os.link,
    "link_read_only_checked": _linked_read_only,
    "copy_file_range_checked": disk.copy,
    "plain_copy_checked": _plain_copy,
}


def carry_all(shards: list[Path], way: str, into: Path) -> float:
    """Seconds to carry every shard into `into` one way."""
    carry = WAYS[way]
    into.mkdir()
    os.sync()  # no earlier way's writes left for this one's flushes to wait on
    start = time.perf_counter()
    for shard in shards:
        if way != "link":
            stored_checksum(str(shard))
        if carry:
            carry(str(shard), str(into / shard.name))
    return time.perf_counter() - start


def main(count: int, repeats: int) -> dict:
    corpus_root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    manifest = make_corpus(corpus_root / f"tfrp-corpus-{count}", count)
    older = older_manifest(manifest, manifest.with_name("manifest-older.csv"))
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(dir=corpus_root) as out:
        root = Path(out) / "nightly"
        subprocess.run(convert(older, root), check=True, stdout=subprocess.DEVNULL)
        version = root / "versions" / json.loads((root / "LATEST").read_text())["version"]
        shards = sorted(version.glob("train-*"))
        for number in range(repeats):
            for way in WAYS:
                seconds[way].append(carry_all(shards, way, Path(out) / f"{way}-{number}"))
                shutil.rmtree(Path(out) / f"{way}-{number}")
        size = sum(shard.stat().st_size for shard in shards)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {
        "images": count,
        "shards": len(shards),
        "shard_bytes": size,
        "machine": machine,
        "file_system": subprocess.run(
            ["stat", "-f", "-c", "%T", str(corpus_root)], capture_output=True, text=True
        ).stdout.strip(),
        "median_s": {way: statistics.median(values) for way, values in seconds.items()},
        "samples_s": seconds,
    }


if __name__ == "__main__":
    images = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    report = main(images, int(os.environ.get("BENCH_REPEATS", "5")))
    for way, value in report["median_s"].items():
        print(f"{way:>24}: {value * 1000:8.1f} ms for {report['shard_bytes'] / 1e6:.0f} MB")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / f"carry-costs-{images}.json").write_text(json.dumps(report, indent=2) + "\n")
