"""Random-access reads, as Grain's global shuffle makes them, beside sequential tf.data over the
same records: `python benchmarks/random_access.py 20000`.

The corpus (benchmarks/corpus.py) is converted once with `--write_index`. Each reader in
READERS opens the train split as a random-access source (`__len__`, `__getitem__`) and reads
every record once, in a seeded random order, with 1 and 8 threads (each thread a contiguous
part of the order: the reader's cost, not an executor's); tf.data's TFRecordDataset reads the
same shards in file order (with 8 threads: `num_parallel_reads=8`). A reader is a function
(root, split) -> source: ArrayRecord's reader is one more entry. Every measurement is a process
of its own, which reports its peak RSS and its RSS before the first read (after imports and
opening the source), so what reading holds is the difference. The shards are read whole once
before the clock starts, so every row reads from a warm page cache; each figure is the median
of BENCH_REPEATS rounds (3). Writes benchmarks/results/random-access-N.json.
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
from pathlib import Path

from corpus import make_corpus

HERE = Path(__file__).resolve().parent
CLI = str(Path(sys.executable).parent / "tfrecord-pipeline")
SPLIT = "train"
THREADS = (1, 8)


def grain_source(root: str, split: str):
    from tfrecord_pipeline import grain_source

    return grain_source(root, split)


READERS = {"grain_source": grain_source}  # name -> (root, split) -> a random-access source


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
        source = READERS[reader](root, SPLIT)
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


def converted(count: int, corpus_root: Path) -> str:
    """The corpus of `count` images converted with index files (made once, kept for reruns)."""
    manifest = make_corpus(corpus_root / f"tfrp-corpus-{count}", count)
    root = corpus_root / f"tfrp-indexed-{count}"
    if not (root / "LATEST").exists():
        command = [CLI, "convert", "--manifest", str(manifest), "--output", str(root)]
        subprocess.run([*command, "--write_index", "--no_progress"], check=True)
    return str(root)


def warm(root: str) -> None:
    """Every shard read whole once: every row then reads from the page cache alike."""
    for path in Path(root).glob("versions/*/*.tfrecord"):
        with open(path, "rb") as handle:
            while handle.read(1 << 20):
                pass


def main(count: int, repeats: int, readers=(*READERS, "tf.data")) -> dict:
    corpus_root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    root = converted(count, corpus_root)
    warm(root)
    rows = []
    for reader in readers:
        for threads in THREADS:
            samples = [measure(reader, root, threads) for _ in range(repeats)]
            seconds = statistics.median(sample["seconds"] for sample in samples)
            first = samples[0]
            rows.append(
                {
                    "reader": reader,
                    "access": "sequential" if reader == "tf.data" else "random",
                    "threads": threads,
                    "records": first["records"],
                    "bytes": first["bytes"],
                    "records_per_s": round(first["records"] / seconds),
                    "mb_per_s": round(first["bytes"] / seconds / 1e6, 1),
                    "rss_before_reads_mb": round(max(s["rss_before_reads_mb"] for s in samples), 1),
                    "peak_rss_mb": round(max(s["peak_rss_mb"] for s in samples), 1),
                    "samples_s": [round(sample["seconds"], 4) for sample in samples],
                }
            )
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {"images": count, "split": SPLIT, "machine": machine, "rows": rows}


def markdown(report: dict) -> str:
    lines = [
        "| reader | access | threads | records/s | MB/s | RSS before reads | peak RSS |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['reader']} | {row['access']} | {row['threads']} | "
            f"{row['records_per_s']:,} | {row['mb_per_s']} | {row['rss_before_reads_mb']} MB | "
            f"{row['peak_rss_mb']} MB |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        sys.exit(0)
    images = int(sys.argv[1])
    report = main(images, int(os.environ.get("BENCH_REPEATS", "3")))
    print(markdown(report))
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / f"random-access-{images}.json").write_text(json.dumps(report, indent=2) + "\n")
