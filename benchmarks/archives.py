"""Archives as inputs, beside what users write instead, in one sitting:
`python benchmarks/archives.py 2000` (N images; the memory runs: `... 2000 --big_mb 2048`).

Every run is a whole process measured by measure.py (wall time with start-up, peak RSS of the
process tree), its CPU the user + system time of that tree (getrusage(RUSAGE_CHILDREN) once it
is waited for), repeated in rounds, each figure the median over rounds:
  converter, loose files       `tfrecord-pipeline convert` of the corpus's CSV manifest
  converter, one tar           the same images in one tar of class folders (archive_inputs.py)
  converter, WebDataset shards the same images as a folder of WebDataset shards (key.jpg +
                               key.cls), made with webdataset.TarWriter where .venv-peers exists
  tar loop                     a hand-written tarfile -> tf.train.Example -> TFRecordWriter loop
                               over the one tar (archive_peers.py tar_loop)
  Hugging Face datasets        Dataset.from_parquet of a Parquet with an Image feature, into a
                               TFRecordWriter (archive_peers.py hf_loop); skipped, with the
                               reason, where .venv-peers is missing (`make bench-peers`)
Each run's records are read back: one an image, or the sitting stops. Then memory: the
converter's peak RSS converting a tar of SMALL_MB and one of --big_mb (distinct copies of the
corpus's images), and their ratio; and the floor beneath the ratio: the small tar converted
with a shard for each core, so that every writer process writes, as in the big tar's run (the
small tar's one shard is written by the launcher while the writer processes wait). Writes
benchmarks/results/archives-N.json.
"""

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import archive_inputs
from bench import CLI, CONVERT, PEERS_PYTHON, records_in
from corpus import make_corpus
from measure import run_measured
from writer_cpu import records_of

HERE = Path(__file__).resolve().parent
PEERS = str(HERE / "archive_peers.py")
SMALL_MB, BIG_MB = 10, 2048
LOOSE, TAR, SHARDS = "converter, loose files", "converter, one tar", "converter, WebDataset shards"
TAR_LOOP, HF = "tar loop (tarfile + TFRecordWriter)", "Hugging Face datasets (from_parquet)"
# (label, numerator, denominator): images/s over images/s
SPEED_RATIOS = (
    ("one tar / loose files", TAR, LOOSE),
    ("WebDataset shards / loose files", SHARDS, LOOSE),
    ("one tar / tar loop", TAR, TAR_LOOP),
    ("WebDataset shards / Hugging Face datasets", SHARDS, HF),
)
CPU_TARGET = 1.0  # CPU per image from an archive over from loose files, at most (issue 43)
MEMORY_TARGET = 1.2  # peak RSS of the big tar's conversion over the small one's, at most


def measured(command: list[str]) -> dict:
    """run_measured's figures and the CPU seconds of the command's whole process tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run_measured(command)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {**result, "cpu_s": round(cpu, 3)}


def convert(source: Path, out: Path, flags: tuple[str, ...] = CONVERT) -> list[str]:
    return [CLI, "convert", "--manifest", str(source), "--output", str(out), *flags]


def inputs(manifest: Path, scratch: Path) -> dict:
    """Each run's input, made from the corpus; the peers' own inputs where .venv-peers exists."""
    made = {
        LOOSE: manifest,
        TAR: archive_inputs.class_folder_tar(manifest, scratch / "images.tar"),
        TAR_LOOP: scratch / "images.tar",
    }
    if PEERS_PYTHON.exists():
        for name, folder in (("wds_shards", "shards"), ("hf_parquet", "parquet")):
            command = [str(PEERS_PYTHON), PEERS, name, str(manifest), str(scratch / folder)]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        made[SHARDS], made[HF] = scratch / "shards", scratch / "parquet" / "images.parquet"
    else:
        made[SHARDS] = archive_inputs.webdataset_shards(manifest, scratch / "shards")
    return made


def command_of(name: str, source: Path, out: Path) -> list[str]:
    if name == TAR_LOOP:
        return [sys.executable, PEERS, "tar_loop", str(source), str(out)]
    if name == HF:
        return [str(PEERS_PYTHON), PEERS, "hf_loop", str(source), str(out)]
    return convert(source, out)


def one_run(name: str, source: Path, count: int) -> dict:
    """One whole run in a fresh output folder; it must have written `count` records."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "o"
        result = measured(command_of(name, source, out))
        found = records_in(out, "*.tfrecord") if name in (TAR_LOOP, HF) else records_of(out)
    if found != count:
        raise RuntimeError(f"{name}: {found} records of {count} images")
    return result


def summarise(samples: list[dict], count: int) -> dict:
    seconds = statistics.median(s["seconds"] for s in samples)
    cpu = statistics.median(s["cpu_s"] for s in samples)
    return {
        "images_per_s": round(count / seconds, 1),
        "cpu_us_per_image": round(cpu / count * 1e6, 1),
        "peak_rss_tree_mb": max(s["peak_rss_tree_mb"] for s in samples),
        "samples": samples,
    }


def speeds(count: int, rounds: int, manifest: Path, scratch: Path) -> dict:
    """Every run's figures, or why it was skipped."""
    made = inputs(manifest, scratch)
    names = (LOOSE, TAR, SHARDS, TAR_LOOP, HF)
    samples: dict[str, list] = {name: [] for name in names if name in made}
    for number in range(1, rounds + 1):
        for name, runs in samples.items():
            runs.append(one_run(name, made[name], count))
            print(
                f"round {number}  {name:40s} {count / runs[-1]['seconds']:8.1f} img/s", flush=True
            )
    skipped = f"skipped: not installed ({PEERS_PYTHON} is missing; `make bench-peers` makes it)"
    return {
        name: summarise(samples[name], count) if name in samples else {"skipped": skipped}
        for name in names
    }


def memory(manifest: Path, scratch: Path, small_mb: float, big_mb: float) -> dict:
    """The converter's peak RSS on a tar of `small_mb`, one of `big_mb`, and the small one
    with every writer process writing (the floor); the big one's over each."""
    runs, made = {}, {}
    every_core = ("--num_shards", str(os.cpu_count()))
    for label, megabytes, flags in (
        ("small", small_mb, ()),
        ("floor", small_mb, every_core),
        ("big", big_mb, ()),
    ):
        if megabytes not in made:
            tar = scratch / f"sized-{megabytes:g}.tar"
            made[megabytes] = tar, archive_inputs.sized_tar(manifest, tar, int(megabytes * 2**20))
        tar, images = made[megabytes]
        result = measured(convert(tar, scratch / f"out-{label}", ("--no_progress", *flags)))
        if records_of(scratch / f"out-{label}") != images:
            raise RuntimeError(f"the {megabytes} MB tar: not one record an image")
        runs[label] = {"mb": megabytes, "images": images, "flags": flags, **result}
        if label != "small":  # the floor's run is the small tar's second
            tar.unlink()
        subprocess.run(["rm", "-rf", str(scratch / f"out-{label}")], check=True)
        print(
            f"memory  {label:5s} {megabytes:8.1f} MB tar, {images:,} images: {result}", flush=True
        )
    tree = {label: run["peak_rss_tree_mb"] for label, run in runs.items()}
    return {
        **runs,
        "big_over_small": round(tree["big"] / tree["small"], 2),
        "big_over_floor": round(tree["big"] / tree["floor"], 2),
        "target": MEMORY_TARGET,
    }


def ratios(runs: dict) -> dict:
    """images/s ratios, and CPU per image from each archive over from loose files."""

    def value(a: str, b: str, key: str) -> float | None:
        if "skipped" in runs[a] or "skipped" in runs[b]:
            return None
        return round(runs[a][key] / runs[b][key], 2)

    found = {label: value(a, b, "images_per_s") for label, a, b in SPEED_RATIOS}
    for name in (TAR, SHARDS):
        found[f"CPU per image, {name.split(', ')[1]} / loose files"] = value(
            name, LOOSE, "cpu_us_per_image"
        )
    return found


def main(count: int, rounds: int, small_mb: float = SMALL_MB, big_mb: float = BIG_MB) -> dict:
    root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    manifest = make_corpus(root / f"tfrp-corpus-{count}", count)
    with tempfile.TemporaryDirectory(dir=os.environ.get("ARCHIVES_DIR")) as folder:
        runs = speeds(count, rounds, manifest, Path(folder))
        held = memory(manifest, Path(folder), small_mb, big_mb)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return {
        "images": count,
        "rounds": rounds,
        "machine": machine,
        "runs": runs,
        "ratios": ratios(runs),
        "cpu_target": CPU_TARGET,
        "memory": held,
    }


if __name__ == "__main__":
    arguments = sys.argv[1:]
    big = float(arguments[arguments.index("--big_mb") + 1]) if "--big_mb" in arguments else BIG_MB
    images = int(arguments[0]) if arguments and arguments[0].isdigit() else 2000
    report = main(images, int(os.environ.get("BENCH_REPEATS", "3")), big_mb=big)
    for name, run in report["runs"].items():
        shown = run.get("skipped") or (
            f"{run['images_per_s']:9.1f} img/s  {run['cpu_us_per_image']:8.1f} us CPU an image"
        )
        print(f"{name:42s} {shown}")
    for label, value in report["ratios"].items():
        print(f"{label:45s} {'skipped' if value is None else f'{value:.2f}'}")
    held = report["memory"]
    print(
        f"peak RSS, {held['big']['mb']:g} MB tar / {held['small']['mb']:g} MB tar: "
        f"{held['big_over_small']:.2f}x (target <= {MEMORY_TARGET}x); over the floor (the "
        f"small tar, every writer process writing): {held['big_over_floor']:.2f}x"
    )
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / f"archives-{images}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {results}/archives-{images}.json")
