"""Random-access reads, as Grain's global shuffle makes them, beside sequential tf.data over the
same records, and what writing ArrayRecord shards costs a conversion:
`python benchmarks/random_access.py 2000 20000` (one or more corpus sizes).

For each size the corpus (benchmarks/corpus.py) is converted twice, pass-through on the local
runner: to TFRecord with `--write_index` (grain_source reads by its offsets) and with
`--file_format array_record`. Each reader in READERS opens the train split of its format as a
random-access source (`__len__`, `__getitem__`) and reads every record once, in a seeded
random order, with 1 and 8 threads (each thread a contiguous part of the order: the reader's
cost, not an executor's); tf.data's TFRecordDataset reads the same TFRecord shards in file
order (with 8 threads: `num_parallel_reads=8`). Every measurement is a process of its own,
which reports its peak RSS and its RSS before the first read (after imports and opening the
source), so what reading holds is the difference: flat when it does not grow with the size.
The shards are read whole once before the clock starts, so every row reads from a warm page
cache; each figure is the median of BENCH_REPEATS rounds (3).

The conversion's cost: the largest size converted to each format (no index files),
alternately, BENCH_REPEATS times into fresh folders; wall seconds of the whole command
(medians), and their ratio. Writes benchmarks/results/random-access-<sizes>.json.
"""

import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from corpus import make_corpus

HERE = Path(__file__).resolve().parent
CLI = str(Path(sys.executable).parent / "tfrecord-pipeline")
SPLIT = "train"
THREADS = (1, 8)


FORMATS = {"tfrecord": [], "array_record": ["--file_format", "array_record"]}  # flags of each
READ_FLAGS = {"tfrecord": ["--write_index"], "array_record": []}  # what random access needs


def grain_source(root: str, split: str):
    from tfrecord_pipeline import grain_source

    return grain_source(root, split)


def array_record_source(root: str, split: str):
    """Grain's own source over the split's ArrayRecord shards, as a Grain user opens them."""
    import grain

    from tfrecord_pipeline.read.reader import open_dataset

    folder, info = open_dataset(root)
    paths = [f"{folder}/{shard.file}" for shard in info.splits[split].shards]
    return grain.sources.ArrayRecordDataSource(paths)


class Reader(NamedTuple):
    file_format: str  # the conversion it reads
    source: Callable  # (root, split) -> a random-access source


READERS = {
    "grain_source": Reader("tfrecord", grain_source),
    "ArrayRecordDataSource": Reader("array_record", array_record_source),
}


def _status_mb(field: str) -> float:
    """A field of this process's /proc status in MB: `VmRSS` now, `VmHWM` its peak (unlike
    getrusage's ru_maxrss, not inherited from the parent across the exec that started it)."""
    with open("/proc/self/status") as handle:
        kb = next(int(line.split()[1]) for line in handle if line.startswith(f"{field}:"))
    return kb / 1024


def read_randomly(source, threads: int, seed: int = 0) -> tuple[int, int]:
    """(records, bytes) of every record of `source` read once, in a seeded random order split
    into `threads` contiguous parts, a thread each."""
    order = random.Random(seed).sample(range(len(source)), len(source))
    totals = [0] * threads

    def read(part: int) -> None:
        totals[part] = sum(len(source[i]) for i in order[part::threads])

    workers = [threading.Thread(target=read, args=(part,)) for part in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return len(order), sum(totals)


def tf_data(root: str, split: str, threads: int):
    """The split's shards in file order as tf.data's TFRecordDataset, its runtime started (a
    record read and dropped): TensorFlow's start is not the reading's."""
    import tensorflow as tf

    from tfrecord_pipeline.read.reader import open_dataset

    folder, info = open_dataset(root)
    files = [f"{folder}/{shard.file}" for shard in info.splits[split].shards]
    dataset = tf.data.TFRecordDataset(files, num_parallel_reads=threads if threads > 1 else None)
    list(dataset.take(1).as_numpy_iterator())
    return dataset


def read_in_order(dataset) -> tuple[int, int]:
    """(records, bytes) of every record of a tf.data dataset of records."""
    # Handed to Python as batches (as a training step takes them), each record as bytes, as a
    # random-access source gives it: no Python step a record, and no tracing of a function.
    records = total = 0
    for batch in dataset.batch(256).as_numpy_iterator():
        records, total = records + len(batch), total + sum(map(len, batch))
    return records, total


def child(reader: str, root: str, threads: int) -> dict:
    """One measurement, in this process: seconds, records, bytes and memory."""
    if reader == "tf.data":
        dataset = tf_data(root, SPLIT, threads)
        before = _status_mb("VmRSS")
        start = time.perf_counter()
        records, total = read_in_order(dataset)
    else:
        source = READERS[reader].source(root, SPLIT)
        before = _status_mb("VmRSS")
        start = time.perf_counter()
        records, total = read_randomly(source, threads)
    seconds = time.perf_counter() - start
    memory = {"rss_before_reads_mb": before, "peak_rss_mb": _status_mb("VmHWM")}
    return {"seconds": seconds, "records": records, "bytes": total, **memory}


def measure(reader: str, root: str, threads: int) -> dict:
    command = [sys.executable, __file__, "--child", reader, root, str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{reader} with {threads} threads failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def convert(manifest: Path, root: Path, flags: list[str]) -> float:
    """Wall seconds of a pass-through conversion of `manifest` into `root` with `flags`."""
    command = [CLI, "convert", "--manifest", str(manifest), "--output", str(root), "--no_progress"]
    start = time.perf_counter()
    subprocess.run([*command, *flags], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def converted(count: int, corpus_root: Path) -> dict[str, str]:
    """The corpus of `count` images converted to each format (made once, kept for reruns)."""
    manifest = make_corpus(corpus_root / f"tfrp-corpus-{count}", count)
    roots = {}
    for file_format in FORMATS:
        root = corpus_root / f"tfrp-random-{file_format}-{count}"
        if not (root / "LATEST").exists():
            convert(manifest, root, FORMATS[file_format] + READ_FLAGS[file_format])
        roots[file_format] = str(root)
    return roots


def warm(root: str) -> None:
    """Every file of the published versions read whole once: every row then reads from the
    page cache alike."""
    for path in filter(Path.is_file, Path(root).glob("versions/*/*")):
        with open(path, "rb") as handle:
            while handle.read(1 << 20):
                pass


def reads(count: int, roots: dict[str, str], repeats: int) -> list[dict]:
    """A row for each reader and thread count over the corpus of `count` images."""
    rows = []
    for reader in (*READERS, "tf.data"):
        root = roots[READERS[reader].file_format if reader in READERS else "tfrecord"]
        for threads in THREADS:
            samples = [measure(reader, root, threads) for _ in range(repeats)]
            seconds = statistics.median(sample["seconds"] for sample in samples)
            first = samples[0]
            before = max(s["rss_before_reads_mb"] for s in samples)
            peak = max(s["peak_rss_mb"] for s in samples)
            rows.append(
                {
                    "images": count,
                    "reader": reader,
                    "access": "sequential" if reader == "tf.data" else "random",
                    "threads": threads,
                    "records": first["records"],
                    "bytes": first["bytes"],
                    "records_per_s": round(first["records"] / seconds),
                    "mb_per_s": round(first["bytes"] / seconds / 1e6, 1),
                    "rss_before_reads_mb": round(before, 1),
                    "peak_rss_mb": round(peak, 1),
                    "held_by_reading_mb": round(peak - before, 1),
                    "samples_s": [round(sample["seconds"], 4) for sample in samples],
                }
            )
    return rows


def conversion_cost(count: int, corpus_root: Path, repeats: int) -> dict:
    """Wall seconds of the pass-through conversion of `count` images to each format, the two
    alternating in each round so a noisy stretch of the machine falls on both."""
    manifest = make_corpus(corpus_root / f"tfrp-corpus-{count}", count)
    samples = {file_format: [] for file_format in FORMATS}
    with tempfile.TemporaryDirectory(dir=corpus_root) as scratch:
        for number in range(repeats):
            for file_format in FORMATS:
                root = Path(scratch) / f"{file_format}-{number}"
                seconds = convert(manifest, root, FORMATS[file_format])
                samples[file_format].append(round(seconds, 3))
    medians = {file_format: statistics.median(s) for file_format, s in samples.items()}
    ratio = medians["array_record"] / medians["tfrecord"]
    return {
        "images": count,
        "seconds": medians,
        "array_record_over_tfrecord": round(ratio, 3),
        "samples_s": samples,
    }


def main(counts: list[int], repeats: int) -> dict:
    corpus_root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    rows = []
    for count in counts:
        roots = converted(count, corpus_root)
        for root in roots.values():
            warm(root)
        rows += reads(count, roots, repeats)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    conversion = conversion_cost(max(counts), corpus_root, repeats)
    return {"split": SPLIT, "machine": machine, "rows": rows, "conversion": conversion}


def markdown(report: dict) -> str:
    lines = [
        "| images | reader | access | threads | records/s | MB/s | RSS before reads | peak RSS |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['images']:,} | {row['reader']} | {row['access']} | {row['threads']} | "
            f"{row['records_per_s']:,} | {row['mb_per_s']} | {row['rss_before_reads_mb']} MB | "
            f"{row['peak_rss_mb']} MB |"
        )
    conversion = report["conversion"]
    seconds = ", ".join(f"{name} {s:.2f} s" for name, s in conversion["seconds"].items())
    lines.append(
        f"\nConversion of {conversion['images']:,} images: {seconds}; ArrayRecord / TFRecord "
        f"{conversion['array_record_over_tfrecord']:.2f}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        sys.exit(0)
    sizes = [int(argument) for argument in sys.argv[1:]]
    report = main(sizes, int(os.environ.get("BENCH_REPEATS", "3")))
    print(markdown(report))
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    name = "-".join(map(str, sizes))
    (results / f"random-access-{name}.json").write_text(json.dumps(report, indent=2) + "\n")
