"""The checked floor: the least a converter that checks every JPEG spends, and nothing else,
on every core: `python benchmarks/checked_floor.py MANIFEST OUT_DIR`.

Each image is read, its SHA-256 taken (the key every record holds), its scans decoded by
libjpeg-turbo at 1/8 scale, luma only, strictly (simplejpeg: a warning is an error; the check
`--validate scans` makes of every JPEG), and its bytes framed as a TFRecord (length, masked
CRC-32Cs) into a file. The rows are cut into contiguous runs of TASK_IMAGES, a file each, taken
in turn by one forked process a core (small tasks: no core waits at the end for another's).
Unlike peers.py's validation_floor (one process, nothing written, held against a one-process
reduced-size decode loop), this is the floor a pass-through conversion on every core is held
against: bench.py's "converter / checked floor".
"""

import hashlib
import multiprocessing
import os
import sys
from pathlib import Path

import simplejpeg
from peers import _rows

from tfrecord_pipeline.transforms.tfrecord.records import frame

TASK_IMAGES = 500


def _check(data: bytes) -> None:
    hashlib.sha256(data).digest()
    height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    eighth = {"min_height": -(-height // 8), "min_width": -(-width // 8)}
    simplejpeg.decode_jpeg(data, "GRAY", strict=True, **eighth)


def write_file(task: tuple[list[str], str]) -> int:
    """Every image of a task read, checked and framed into the task's file; the records."""
    paths, out = task
    with open(out, "wb") as sink:
        for path in paths:
            with open(path, "rb") as source:
                data = source.read()
            _check(data)
            sink.write(frame(data))
    return len(paths)


def tasks(paths: list[str], out: Path) -> list[tuple[list[str], str]]:
    """The paths cut into contiguous runs of TASK_IMAGES, each with its file under `out`."""
    return [
        (paths[start : start + TASK_IMAGES], str(out / f"part-{start:09d}.tfrecord"))
        for start in range(0, len(paths), TASK_IMAGES)
    ]


def run(manifest: str, out: Path) -> int:
    paths = [path for path, _ in _rows(manifest)]
    with multiprocessing.get_context("fork").Pool(os.cpu_count()) as pool:
        return sum(pool.imap_unordered(write_file, tasks(paths, out)))


if __name__ == "__main__":
    manifest, out = sys.argv[1:3]
    Path(out).mkdir(parents=True, exist_ok=True)
    run(manifest, Path(out))
