"""Cloud Storage requests and bytes per image when the converter reads a folder of tars on
`gs://`, counted against the Cloud Storage emulator: `python benchmarks/archive_requests.py 2000`
(N images of the benchmark corpus, in tars of SHARD_IMAGES each).

For each case (WebDataset shards, key.jpg + key.cls, mixed into shards by key hash and kept in
their order, `--archive_order keep`; class-folder tars, label/name.jpg, mixed) the tars are
uploaded to the emulator and read through benchmarks/latency_store.py with no delay and nothing
held in memory, which forwards every request and counts the bytes of its answers. Two
fresh processes are counted: the manifest step alone (the launcher's check of `--manifest`, then
every archive listed into rows, as a conversion lists them: transforms/manifest/sources.py) and
a whole `tfrecord-pipeline convert` of the folder to a local output; then a third, the same
command with `--incremental` (nothing changed: every archive is carried unread, the published
shards checked by their listing). Requests are GETs in the
emulator's request log (as benchmarks/read_requests.py counts them); bytes are the store's.
The whole run's less the listing's are the member reads. Per image, and bytes over the tars'
bytes. Writes benchmarks/results/archive-requests.json.
"""

import json
import re
import resource
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import archive_inputs
from archive_peers import SHARD_IMAGES
from bench import CLI, CONVERT
from corpus import make_corpus
from emulator import BUCKET, storage_emulator
from latency_store import running
from writer_cpu import records_of

HERE = Path(__file__).resolve().parent
GET = re.compile(rb'^"GET /\S* HTTP/1\.[01]" \d{3} ', re.M)  # a GET in the server's log
KEEP = ("--archive_order", "keep")
LAYOUTS = {  # (the tars, the conversion's flags)
    "WebDataset shards, mixed": (archive_inputs.webdataset_shards, ()),
    "WebDataset shards, kept in order": (archive_inputs.webdataset_shards, KEEP),
    "class-folder tars, mixed": (archive_inputs.class_folder_tars, ()),
    "loose objects, class folders": (archive_inputs.class_folders, ()),  # what tars save
}
# The manifest step alone: what a conversion runs before its shard writers start (its staging
# folder a temporary one: a tar kept in order is copied there as it is listed).
LISTING = (
    "import sys, tempfile\n"
    "from tfrecord_pipeline.transforms.manifest.rows import ReadConfig\n"
    "from tfrecord_pipeline.transforms.manifest.sources import check_manifests, read_all\n"
    "config = ReadConfig(unpack_to=tempfile.mkdtemp(), max_file_bytes=256 << 20)\n"
    "manifests = check_manifests([sys.argv[1]], config)\n"
    "config = config._replace(keep_order=len(manifests) if sys.argv[2:] else 0)\n"
    "print(sum(1 for m in manifests for _ in read_all(m, config)))\n"
)


def counted(log: Path, store: str) -> tuple[int, int, float]:
    """(GETs the emulator logged, bytes the store forwarded, CPU seconds of this process's
    finished children: the conversions, with their own processes) so far."""
    with urllib.request.urlopen(f"{store}/_counts") as answer:
        forwarded = json.loads(answer.read())
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = children.ru_utime + children.ru_stime
    return len(GET.findall(log.read_bytes())), forwarded.get("forwarded GET bytes", 0), cpu


def run_counted(command: list[str], log: Path, store: str, env: dict) -> dict:
    before = counted(log, store)
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode:
        raise RuntimeError(f"{command[:3]} failed: {done.stderr.decode()[-2000:]}")
    after = counted(log, store)
    return {
        "gets": after[0] - before[0],
        "bytes": after[1] - before[1],
        "cpu_s": after[2] - before[2],
    }


def per_image(counts: dict, images: int, archive_bytes: int) -> dict:
    return {
        **counts,
        "gets_per_image": round(counts["gets"] / images, 3),
        "bytes_over_archives": round(counts["bytes"] / archive_bytes, 3),
        "cpu_us_per_image": round(counts["cpu_s"] / images * 1e6),
    }


def layout(name: str, manifest: Path, count: int, log: Path, env: dict, bucket) -> dict:
    """The counts of one layout's listing, member reads and whole run."""
    make, flags = LAYOUTS[name]
    with tempfile.TemporaryDirectory() as folder:
        tars = make(manifest, Path(folder) / "tars")
        prefix = name.replace(" ", "-").replace(",", "")
        archive_bytes, archives = 0, sorted(path for path in tars.rglob("*") if path.is_file())
        for tar in archives:
            bucket.blob(f"{prefix}/{tar.relative_to(tars).as_posix()}").upload_from_filename(
                str(tar)
            )
            archive_bytes += tar.stat().st_size
        source = f"gs://{BUCKET}/{prefix}/"  # a folder on gs:// ends in /
        with running(env["STORAGE_EMULATOR_HOST"], "nothing-held/", 0) as store:
            through = {**env, "STORAGE_EMULATOR_HOST": store}
            listing = [sys.executable, "-c", LISTING, source, *flags[1:]]
            listed = run_counted(listing, log, store, through)
            out = Path(folder) / "out"
            convert = [CLI, "convert", "--manifest", source, "--output", str(out), *CONVERT, *flags]
            whole = run_counted(convert, log, store, through)
            refresh = run_counted([*convert, "--incremental"], log, store, through)
        if records_of(out) != count:
            raise RuntimeError(f"{name}: {records_of(out)} records of {count} images")
    members = {key: whole[key] - listed[key] for key in whole}
    return {
        "archives": len(archives),
        "archive_bytes": archive_bytes,
        "listing": per_image(listed, count, archive_bytes),
        "member_reads": per_image(members, count, archive_bytes),
        "whole_run": per_image(whole, count, archive_bytes),
        "refresh_unchanged": per_image(refresh, count, archive_bytes),
    }


def main(count: int, layouts: tuple[str, ...] = tuple(LAYOUTS)) -> dict:
    root = Path(tempfile.gettempdir())
    manifest = make_corpus(root / f"tfrp-corpus-{count}", count)
    report = {"images": count, "images_per_archive": SHARD_IMAGES, "layouts": {}}
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "requests.log"
        with log.open("wb") as sink, storage_emulator(sink) as (env, bucket):
            for name in layouts:
                report["layouts"][name] = layout(name, manifest, count, log, env, bucket)
                print(name, json.dumps(report["layouts"][name]), flush=True)
    return report


def markdown(report: dict) -> str:
    """The README's table: GETs an image and bytes over the tars' bytes, by part of the run."""
    lines = [
        "| layout | part | GETs an image | bytes read / archive bytes | CPU an image |",
        "|---|---|---:|---:|---:|",
    ]
    for name, counts in report["layouts"].items():
        for part in ("listing", "member_reads", "whole_run", "refresh_unchanged"):
            row = counts[part]
            label = part.replace("_", " ")
            lines.append(
                f"| {name} | {label} | {row['gets_per_image']:g} | {row['bytes_over_archives']:g}"
                f" | {row['cpu_us_per_image']:,} µs |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    result = main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
    print(markdown(result))
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "archive-requests.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {results}/archive-requests.json")
