"""CPU per gs:// image of the converter, whole conversions and its read alone, against a C++
floor and the peers' read paths, in one sitting on loopback: `python benchmarks/gcs_read_cost.py
1000`, or only some of its runs: `... 1000 convert-local,convert-DirectRunner,floor_checked`.

Uploads N JPEGs of the benchmark corpus (~40 KB) and two manifests of their gs:// paths (the
first N and the first N/4) to the Cloud Storage emulator, and serves the images through
benchmarks/latency_store.py with no delay: the emulator closes every connection after one
answer (HTTP/1.0), one connection at a time, where Cloud Storage keeps connections open
(HTTP/1.1), so against the emulator every reader would pay a new connection an image (in
Python, ~250 us of the converter's CPU an image) and Beam's runners would spend CPU by the
second while the emulator queued them. Everything else (manifests, metadata the store does not
hold) the store forwards to the emulator. Then it runs each of these in a fresh process over
both:
  convert-E  a whole `tfrecord-pipeline convert` of the gs:// manifest to a local folder, on
             engine E (writer_cpu.ENGINES: the local runner with one shard-writer process, the
             DirectRunner, the portable runner with its SDK harness in a process of its own,
             as a Dataflow Runner v2 worker runs it), pass-through, 8 shards, its writer
             reading on THREADS threads like every reader here: CPU is compared at one
             concurrency. (By default a writer runs ~100 threads a core, sized for 40 ms
             requests: benchmarks/reads_in_flight.py measures those.)
  convert-defaults  the same conversion with the converter's defaults, as a user runs it:
             the local runner, its own processes and threads (~100 a core at 0 ms here,
             where the threads contend for the GIL instead of waiting out a latency);
and, on 16 threads each:
  converter  `transforms.storage.gcs.read(path, max_bytes)`, what convert reads an image with;
  floor      pyarrow's C++ client (`pyarrow.fs.GcsFileSystem`), each object's SHA-256 and
             CRC-32C taken and the object framed as a TFRecord into one local file;
  floor_checked  the floor, plus libjpeg-turbo's strict decode of each image's luma at 1/8
             scale: the least a converter that validates every image spends (the converter's
             pass-through check is that decode). Validation alone costs about as much as the
             floor's read, so no validating converter can come within 1.5x of the unchecked
             floor: the target is against the checked one, and both ratios are reported;
  gcs        a plain google-cloud-storage `blob.download_as_bytes()`;
  beam       Beam's `FileSystems.open(path).read()` (gcsio), what Beam pipelines read through.
A run's CPU is the user + system time of its whole process, from getrusage(RUSAGE_CHILDREN) once
it is waited for. The emulator and the store are children of this process too, but they are
only waited for after every run, so their CPU is in no run's figure. Per object: the difference
between the two runs over the objects between them, so start-up (imports, the first
connection) cancels out. Rounds run every reader at both sizes (a slow spell of a shared
machine hits them alike); each CPU figure is the median over rounds, and each ratio to a floor
the median of the rounds' own ratios (`paired_ratio`). Writes
benchmarks/results/gcs-read-cost-N.json.
"""

import concurrent.futures
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
from pathlib import Path

from corpus import make_corpus
from emulator import BUCKET, arrow_store, storage_emulator
from latency_store import running
from writer_cpu import CLI, CONVERT, ENGINES, records_of, tree_cpu

HERE = Path(__file__).resolve().parent
READERS = ("converter", "floor", "floor_checked", "gcs", "beam")
FLOORS = ("floor", "floor_checked")
# Each engine's conversion at the readers' THREADS, and the command as a user runs it: no flag
# beyond the output's (its own processes, and threads sized for Cloud Storage's latency).
CONVERSIONS = (*(f"convert-{engine}" for engine in ENGINES), "convert-defaults")
TARGET = 1.5  # a conversion's CPU per gs:// image over the checked floor's, at most
THREADS = 16
SMALL_SHARE = 4  # the small run reads the first 1/SMALL_SHARE of the objects
MAX_BYTES = 64 << 20  # the converter's read refuses more than this; no image here comes near


def converter_reader():
    from tfrecord_pipeline.transforms.storage import gcs

    return lambda path: gcs.read(path, MAX_BYTES).data


def floor_reader(check: bool = False):
    """pyarrow's C++ client, plus the work a shard writer cannot avoid: a digest, the CRC-32C
    and the record's framing into one local file; with `check`, the least a converter that
    validates every image adds: libjpeg-turbo's strict decode of the luma at 1/8 scale, which
    reads every coefficient of every scan (what the converter's pass-through check does)."""
    import google_crc32c
    import simplejpeg

    from tfrecord_pipeline.transforms.tfrecord.records import frame

    store = arrow_store()
    sink = tempfile.TemporaryFile()  # noqa: SIM115 - open until the process ends
    lock = threading.Lock()

    def read(path: str) -> bytes:
        with store.open_input_stream(path.removeprefix("gs://")) as stream:
            data = stream.read()
        hashlib.sha256(data).digest()
        google_crc32c.value(data)
        if check:
            height, width, _, _ = simplejpeg.decode_jpeg_header(data)
            simplejpeg.decode_jpeg(
                data, "GRAY", min_height=-(-height // 8), min_width=-(-width // 8), strict=True
            )
        record = frame(data)
        with lock:
            sink.write(record)
        return data

    return read


def floor_checked_reader():
    return floor_reader(check=True)


def gcs_reader():
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    host = os.environ["STORAGE_EMULATOR_HOST"]
    client = storage.Client("bench", AnonymousCredentials(), client_options={"api_endpoint": host})
    bucket = client.bucket(BUCKET)
    return lambda path: bucket.blob(path.split("/", 3)[3]).download_as_bytes()


def beam_reader():
    from apache_beam.io.filesystems import FileSystems

    def read(path: str) -> bytes:
        with FileSystems.open(path) as stream:
            return stream.read()

    return read


def child(reader: str, listing: str, count: int) -> None:
    """One measured run: the first `count` paths of the listing, read on THREADS threads."""
    paths = Path(listing).read_text().split()[:count]
    read = globals()[f"{reader}_reader"]()
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        sizes = list(pool.map(lambda path: len(read(path)), paths))
    if len(sizes) != count or min(sizes) == 0:
        raise SystemExit(f"{reader}: read {len(sizes)} of {count} objects")


def run_cpu(reader: str, listing: Path, count: int, env: dict) -> dict:
    """CPU seconds and wall seconds of one fresh process reading `count` objects, or of one
    conversion of the manifest of the first `count`."""
    if reader == "convert-defaults":
        return convert_cpu([], count, env)
    if reader in CONVERSIONS:
        threads = ["--threads", str(THREADS)]  # the readers' concurrency (module docstring)
        return convert_cpu([*ENGINES[reader.removeprefix("convert-")], *threads], count, env)
    command = [sys.executable, __file__, "--child", reader, str(listing), str(count)]
    cpu, wall = tree_cpu(command, env)
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}


def convert_cpu(flags: list[str], count: int, env: dict) -> dict:
    """One whole conversion of the gs:// manifest of the first `count` images to a local
    folder, with `flags`, its records checked."""
    manifest = f"gs://{BUCKET}/manifest-{count}.csv"
    with tempfile.TemporaryDirectory() as out:
        root = Path(out) / "dataset"
        command = [CLI, "convert", "--manifest", manifest, "--output", str(root), *CONVERT]
        cpu, wall = tree_cpu([*command, *flags], env)
        if records_of(root) != count:
            raise RuntimeError(f"{flags[:2]}: {records_of(root)} records of {count} images")
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}


def upload_manifests(bucket, paths: list[str], labels: list[str], counts) -> None:
    """A manifest of the first `count` images' gs:// paths, for each count."""
    for count in counts:
        rows = [f"{path},{label}" for path, label in zip(paths[:count], labels, strict=False)]
        text = "\n".join(["image_uri,label", *rows]) + "\n"
        bucket.blob(f"manifest-{count}.csv").upload_from_string(text)


def upload(bucket, count: int) -> tuple[list[str], list[str], float]:
    """The corpus's first `count` JPEGs as objects; their gs:// paths, labels and mean size
    (KB)."""
    corpus_root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    manifest = make_corpus(corpus_root / f"tfrp-corpus-{count}", count)
    rows = [line.split(",") for line in manifest.read_text().splitlines()[1:]]
    names, labels = [row[0] for row in rows], [row[1] for row in rows]
    files = [manifest.parent / name for name in names]
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda n, f: bucket.blob(n).upload_from_filename(str(f)), names, files))
    kb = sum(f.stat().st_size for f in files) / len(files) / 1024
    return [f"gs://{BUCKET}/{name}" for name in names], labels, kb


def main(count: int, repeats: int, readers: tuple[str, ...] = CONVERSIONS + READERS) -> dict:
    sizes = {"small": max(1, count // SMALL_SHARE), "large": count}  # objects
    with storage_emulator() as (env, bucket):
        paths, labels, kb = upload(bucket, count)
        upload_manifests(bucket, paths, labels, sizes.values())
        with running(env["STORAGE_EMULATOR_HOST"], "images/", delay_ms=0) as store:
            # The portable runner's SDK harness is `python` from PATH: this interpreter's.
            path = os.pathsep.join([str(Path(CLI).parent), env["PATH"]])
            env = {**env, "STORAGE_EMULATOR_HOST": store, "PATH": path}
            samples = rounds(paths, sizes, repeats, readers, env)
    return summarise(count, sizes, repeats, kb, samples)


def rounds(paths: list[str], sizes: dict, repeats: int, readers: tuple, env: dict) -> dict:
    """Each reader's runs at both sizes, round after round."""
    samples = {name: [] for name in readers}
    with tempfile.TemporaryDirectory() as scratch:
        listing = Path(scratch) / "paths.txt"
        listing.write_text("\n".join(paths) + "\n")
        for number in range(1, repeats + 1):
            for name in readers:
                runs = {size: run_cpu(name, listing, n, env) for size, n in sizes.items()}
                extra = runs["large"]["cpu_s"] - runs["small"]["cpu_s"]
                runs["us_per_object"] = round(extra / (sizes["large"] - sizes["small"]) * 1e6, 1)
                samples[name].append(runs)
                us = runs["us_per_object"]
                print(f"round {number}  {name:10s} {us:8.1f} us/object", flush=True)
    return samples


def summarise(count: int, sizes: dict, repeats: int, kb: float, samples: dict) -> dict:
    """Each reader's median CPU per object, its paired ratios to both floors and its median
    wall time."""
    readers = {
        name: {
            "us_per_object": statistics.median(run["us_per_object"] for run in runs),
            "large_run_wall_s": statistics.median(run["large"]["wall_s"] for run in runs),
            "samples": runs,
        }
        for name, runs in samples.items()
    }
    for reader in readers.values():
        for floor in FLOORS:
            reader[f"over_{floor}"] = paired_ratio(reader["samples"], samples.get(floor, []))
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {
        "objects": count,
        "sizes": sizes,
        "mean_object_kb": round(kb, 1),
        "threads": THREADS,
        "machine": machine,
        "repeats": repeats,
        "target_over_floor_checked": TARGET,
        "readers": readers,
    }


def paired_ratio(runs: list[dict], floor_runs: list[dict]) -> float | None:
    """The median over rounds of a reader's CPU per object over the floor's in the same round,
    so a slow spell of a shared machine, which hits the runs of a round alike, cancels out;
    None with no round of the floor measured above 0 (not run, or a tiny run)."""
    ratios = [
        run["us_per_object"] / floor["us_per_object"]
        for run, floor in zip(runs, floor_runs, strict=False)
        if floor["us_per_object"] > 0
    ]
    return round(statistics.median(ratios), 2) if ratios else None


def verdicts(report: dict) -> list[str]:
    """A line for each conversion: its CPU per image over the checked floor, against TARGET."""
    lines = []
    for name, reader in report["readers"].items():
        ratio = reader["over_floor_checked"]
        if name in CONVERSIONS and ratio is not None:
            mark = "ok " if ratio <= TARGET else "MISS"
            lines.append(f"{mark} {name}: {ratio:.2f} x the checked floor (target {TARGET})")
    return lines


def markdown(report: dict) -> str:
    rows = [
        "| run | µs CPU per image | × floor | × checked floor | wall s (N images) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in report["readers"].items():
        ratios = [r["over_floor"], r["over_floor_checked"]]
        shown = " | ".join("" if ratio is None else f"{ratio:.2f}" for ratio in ratios)
        us, wall = r["us_per_object"], r["large_run_wall_s"]
        rows.append(f"| {name} | {us:,.0f} | {shown} | {wall:.2f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        sys.exit(0)
    objects = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    every = CONVERSIONS + READERS
    chosen = tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else every
    if not set(chosen) <= set(every):
        raise SystemExit(f"runs: some of {','.join(every)}")
    report = main(objects, int(os.environ.get("BENCH_REPEATS", "3")), chosen)
    print(markdown(report))
    print("\n".join(verdicts(report)))
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    # Some of the runs never replace the file of a whole sitting.
    written = results / f"gcs-read-cost-{objects}{'' if chosen == every else '-partial'}.json"
    written.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {written}")
