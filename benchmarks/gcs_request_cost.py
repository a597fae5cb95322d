"""CPU per Cloud Storage request of each kind a run sends besides its image reads, the way this
project sends it beside a floor sending the same request with pyarrow's C++ client, in one
sitting against the Cloud Storage emulator: `python benchmarks/gcs_request_cost.py 1000`
(a second argument, `stat,copy`, measures only the kinds it names).

Each kind (KINDS) runs in a fresh process, over N requests and over N/4 (objects of BIG_MB
for the kinds counted per MB: N/MB_SHARE of them, and a quarter of that), THREADS at a time:
  project  the function a run calls (fileio, gcs, listings, joins);
  floor    `pyarrow.fs.GcsFileSystem` doing the same: open_output_stream for an upload,
           open_input_stream for a download (the emulator answers no ranged read of
           pyarrow's: it hangs), copy_file, move, delete_file, get_file_info for
           stats, existence checks, listings and matches. It has no compose: its copy_file
           stands for it.
The requests are not one for one everywhere (counted in the emulator's log): the floor's
copy_file (a copy's, a compose's) sends three (the destination folder's metadata, a page of
its listing, a rewrite) where the project sends one; a download is the floor's one GET against
the project's stat and one range (the object from its start); a stat and a listing are one
each way.
As in gcs_read_cost.py, a run's CPU is its whole process tree's, the emulator (a child waited
for only at the end) not counted, and the difference between the two runs cancels start-up.
The objects a run needs (read, copied, moved, deleted) are made by this process beforehand.
Writes benchmarks/results/gcs-request-cost-N.json.
"""

import concurrent.futures
import functools
import json
import os
import statistics
import sys
from pathlib import Path
from typing import NamedTuple

from emulator import BUCKET, arrow_store, storage_emulator
from gcs_read_cost import SMALL_SHARE, THREADS
from writer_cpu import tree_cpu

HERE = Path(__file__).resolve().parent
WAYS = ("project", "floor")
SMALL_BYTES = 4 << 10  # a rows, index or errors file, metadata, a marker
BIG_MB = 4  # an object of a kind counted per MB (shards run to hundreds)
MB_SHARE = 25  # such kinds make N/MB_SHARE objects
RECORD = 40 << 10  # a shard is written a record at a time: header, image, footer
LISTED = 100  # objects in the folder a listing lists (one page)
CHUNK = 1 << 20  # a ranged read's request (transforms/storage/file_checks.py CHECK_CHUNK)
LISTINGS = ("list", "list_identities", "glob")  # kinds that list one folder of LISTED objects


class Kind(NamedTuple):
    unit: str  # "request" or "MB"
    needs: str  # what the parent makes first: "" nothing, "shared" once, "own" for each run


KINDS = {
    "upload_small": Kind("request", ""),
    "upload_large": Kind("MB", ""),
    "download_large": Kind("MB", "shared"),
    "stat": Kind("request", "shared"),
    "exists": Kind("request", "shared"),
    "list": Kind("request", "shared"),
    "list_identities": Kind("request", "shared"),
    "glob": Kind("request", "shared"),
    "copy": Kind("request", "shared"),
    "compose": Kind("request", "shared"),
    "rename": Kind("request", "own"),
    "delete": Kind("request", "own"),
}


def gs(name: str) -> str:
    return f"gs://{BUCKET}/{name}"


def names(kind: str, run: str, count: int) -> list[str]:
    """The objects one run of `kind` works on: shared by every run, or its own."""
    if KINDS[kind].needs == "shared":  # small objects: one set serves every kind reading them
        folder = f"{kind}/shared" if kind in LISTINGS or KINDS[kind].unit == "MB" else "shared"
    else:
        folder = f"{kind}/{run}"
    if kind in LISTINGS:
        return [f"{folder}/{number:05d}" for number in range(LISTED)]
    return [f"{folder}/{number:05d}" for number in range(count)]


def beside(path: str, what: str) -> str:
    """Where a copy, compose or move of `path` goes: a folder of its own, as empty as a run's
    new folders start (pyarrow's copy_file reads a page of the destination folder's listing,
    which the emulator answers whole, however many objects the folder holds)."""
    return f"{path}.{what}/object"


def record_parts() -> list[bytes]:
    from tfrecord_pipeline.transforms.tfrecord.records import frame_parts

    return list(frame_parts(os.urandom(RECORD)))


def upload_large(create, path: str) -> None:
    """One BIG_MB object written as a shard writer writes it: a framed record at a time."""
    parts = record_parts()
    with create(path) as handle:
        for _ in range((BIG_MB << 20) // sum(map(len, parts))):
            for part in parts:
                handle.write(part)


def download_large(open_, path: str) -> None:
    with open_(path) as stream:
        while stream.read(CHUNK):
            pass


def project_requests(kind: str):
    """The function a run calls for one request of `kind`, given the object's gs:// path."""
    from tfrecord_pipeline.transforms.storage import fileio, gcs, joins, listings

    small = os.urandom(SMALL_BYTES)
    folder = lambda path: path.rpartition("/")[0]  # noqa: E731
    listed = [gs(name) for name in names("list_identities", "", 0)]
    return {
        "upload_small": lambda path: fileio.write_bytes(path, small),
        "upload_large": functools.partial(upload_large, fileio.create),
        "download_large": functools.partial(download_large, lambda p: fileio.open_bytes(p, CHUNK)),
        "stat": gcs.stat,
        "exists": fileio.exists,
        "list": lambda path: list(gcs.list_folder(folder(path))),
        "list_identities": lambda path: listings.listed_identities(listed),
        "glob": lambda path: fileio.glob(folder(path) + "/**"),
        "copy": lambda path: fileio.copy(path, beside(path, "copy")),
        "compose": lambda path: joins.compose([path, path], beside(path, "joined")),
        "rename": lambda path: fileio.rename(path, beside(path, "moved")),
        "delete": lambda path: fileio.delete([path]),
    }[kind]


def floor_requests(kind: str):
    """The same request through pyarrow's C++ client, given the object's gs:// path."""
    from pyarrow import fs

    store = arrow_store()
    small = os.urandom(SMALL_BYTES)
    bare = lambda path: path.removeprefix("gs://")  # noqa: E731
    folder = lambda path: fs.FileSelector(bare(path).rpartition("/")[0])  # noqa: E731
    deep = lambda path: fs.FileSelector(bare(path).rpartition("/")[0], recursive=True)  # noqa: E731

    def upload_small(path: str) -> None:
        with store.open_output_stream(bare(path)) as stream:
            stream.write(small)

    return {
        "upload_small": upload_small,
        "upload_large": functools.partial(
            upload_large, lambda p: store.open_output_stream(bare(p))
        ),
        "download_large": functools.partial(
            download_large, lambda p: store.open_input_stream(bare(p))
        ),
        "stat": lambda path: store.get_file_info(bare(path)),
        "exists": lambda path: store.get_file_info(bare(path)).type != fs.FileType.NotFound,
        "list": lambda path: store.get_file_info(folder(path)),
        "list_identities": lambda path: store.get_file_info(folder(path)),
        "glob": lambda path: store.get_file_info(deep(path)),
        "copy": lambda path: store.copy_file(bare(path), bare(beside(path, "copy"))),
        "compose": lambda path: store.copy_file(bare(path), bare(beside(path, "joined"))),
        "rename": lambda path: store.move(bare(path), bare(beside(path, "moved"))),
        "delete": lambda path: store.delete_file(bare(path)),
    }[kind]


def operations(kind: str, requests: int) -> int:
    """How many of `kind`'s operations N requests stand for: objects of BIG_MB, or requests."""
    return max(SMALL_SHARE, requests // MB_SHARE) if KINDS[kind].unit == "MB" else requests


def child(kind: str, way: str, run: str, count: int) -> None:
    """One measured run: `count` operations of `kind` the `way` way, on THREADS threads. A
    listing kind lists the same folder `count` times."""
    paths = [gs(name) for name in names(kind, run, count)]
    if kind in LISTINGS:
        paths = paths[:1] * count
    request = globals()[f"{way}_requests"](kind)
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(request, paths))


def make_objects(bucket, kind: str, run: str, count: int) -> None:
    """The objects a run of `kind` works on, made here, out of any measured process."""
    size = BIG_MB << 20 if KINDS[kind].unit == "MB" else SMALL_BYTES
    data = os.urandom(size)
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda n: bucket.blob(n).upload_from_string(data), names(kind, run, count)))


def measure(kind: str, way: str, counts: dict, env: dict, bucket, number: int) -> dict:
    """Both runs of one kind one way, and the CPU per unit between them (µs)."""
    runs = {}
    for size, count in counts.items():
        run = f"{way}-{size}-{number}"
        if KINDS[kind].needs == "own":
            make_objects(bucket, kind, run, count)
        command = [sys.executable, __file__, "--child", kind, way, run, str(count)]
        cpu, wall = tree_cpu(command, env)
        if KINDS[kind].needs != "shared":  # the emulator holds every object in its memory
            made = names(kind, run, count)
            gone = [bucket.blob(name) for name in made + [beside(name, "moved") for name in made]]
            bucket.delete_blobs(gone, on_error=lambda blob: None)
        runs[size] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}
    extra = runs["large"]["cpu_s"] - runs["small"]["cpu_s"]
    units = counts["large"] - counts["small"]
    runs["us_per_unit"] = round(
        extra / (units * (BIG_MB if KINDS[kind].unit == "MB" else 1)) * 1e6, 1
    )
    return runs


def main(requests: int, repeats: int, kinds: tuple[str, ...] = tuple(KINDS)) -> dict:
    samples = {kind: {way: [] for way in WAYS} for kind in kinds}
    with storage_emulator() as (env, bucket):
        made = set()
        for kind in kinds:
            shared = names(kind, "", operations(kind, requests))
            if KINDS[kind].needs == "shared" and shared[0] not in made:
                make_objects(bucket, kind, "", operations(kind, requests))
                made.add(shared[0])
        for number in range(1, repeats + 1):
            for kind in kinds:
                large = operations(kind, requests)
                counts = {"small": max(1, large // SMALL_SHARE), "large": large}
                for way in WAYS:
                    runs = measure(kind, way, counts, env, bucket, number)
                    samples[kind][way].append(runs)
                    unit = KINDS[kind].unit
                    print(
                        f"round {number}  {kind:16s} {way:8s} {runs['us_per_unit']:9.1f} us/{unit}",
                        flush=True,
                    )
    return summarise(requests, repeats, samples)


def summarise(requests: int, repeats: int, samples: dict) -> dict:
    """Each kind's median CPU per unit each way, and the project's ratio to the floor."""
    kinds = {}
    for kind, ways in samples.items():
        medians = {
            way: statistics.median(r["us_per_unit"] for r in runs) for way, runs in ways.items()
        }
        floor = medians["floor"]
        kinds[kind] = {
            "unit": KINDS[kind].unit,
            **{f"{way}_us": us for way, us in medians.items()},
            "over_floor": round(medians["project"] / floor, 2) if floor > 0 else None,
            "samples": ways,
        }
    return {
        "requests": requests,
        "big_mb": BIG_MB,
        "threads": THREADS,
        "repeats": repeats,
        "kinds": kinds,
    }


def markdown(report: dict) -> str:
    rows = ["| request | µs CPU, project | µs CPU, floor | × floor |", "|---|---:|---:|---:|"]
    for kind, k in report["kinds"].items():
        times = "" if k["over_floor"] is None else f"{k['over_floor']:.2f}"
        project, floor = f"{k['project_us']:,.0f}", f"{k['floor_us']:,.0f}"
        rows.append(f"| {kind} (per {k['unit']}) | {project} | {floor} | {times} |")
    return "\n".join(rows)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        sys.exit(0)
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    chosen = tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else tuple(KINDS)
    report = main(count, int(os.environ.get("BENCH_REPEATS", "3")), chosen)
    print(markdown(report))
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / f"gcs-request-cost-{count}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {results}/gcs-request-cost-{count}.json")
