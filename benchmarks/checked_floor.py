"""The checked floor: the least a converter that checks every JPEG spends, and nothing else,
on every core: `python benchmarks/checked_floor.py MANIFEST OUT_DIR [--kept]`.

Each image is read, its SHA-256 taken (the key every record holds), its scans decoded by
libjpeg-turbo at 1/8 scale, luma only, strictly (simplejpeg: a warning is an error; the check
`--validate scans` makes of every JPEG), and its bytes framed as a TFRecord (length, masked
CRC-32Cs) into a file. The rows are cut into contiguous runs of TASK_IMAGES, a file each, taken
in turn by one forked process a core (small tasks: no core waits at the end for another's).
Unlike peers.py's validation_floor (one process, nothing written, held against a one-process
reduced-size decode loop), this is the floor a pass-through conversion on every core is held
against: bench.py's "converter / checked floor".

`--kept`, the kept floor: the same, doing also the least of what the converter must and the
checked floor leaves out. It finds where each JPEG's scan data ends (the C-speed search that is
most of the marker walk `--validate scans` makes), frames a `tf.train.Example` built by
protobuf's own runtime (upb) rather than the bare image, and keeps its files: written behind
as they grow (as the converter's are: transforms/storage/write_behind.py), each flushed on a
thread of its process when done, all on the disk before it ends. The checked floor leaves
them in the page cache, where the kernel writes them back after it has exited (or throttles
it, once they pass its dirty-memory limits: 6 GB at 200,000 images).
"""

import hashlib
import multiprocessing
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import simplejpeg
from peers import _rows

from tfrecord_pipeline.transforms.storage.write_behind import open_new
from tfrecord_pipeline.transforms.tfrecord.records import frame

TASK_IMAGES = 500
_MARKER = re.compile(rb"\xff[^\x00]")  # any marker but a stuffed zero: where scan data ends


def _check(data: bytes) -> tuple[int, int, bytes]:
    """The image checked: its height, width and SHA-256."""
    digest = hashlib.sha256(data).digest()
    height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    eighth = {"min_height": -(-height // 8), "min_width": -(-width // 8)}
    simplejpeg.decode_jpeg(data, "GRAY", strict=True, **eighth)
    return height, width, digest


def _example(path: str, label: str, data: bytes, message: type) -> bytes:
    """The kept floor's record: the scan's end found, then the Example the converter writes,
    built by protobuf (`message`: its Example class)."""
    scan = data.find(b"\xff\xda")  # the first scan's header; its data follows
    _MARKER.search(data, scan + 2 + int.from_bytes(data[scan + 2 : scan + 4], "big"))
    height, width, digest = _check(data)
    example = message()
    feature = example.features.feature
    for key, value in (
        ("image/encoded", data),
        ("image/format", b"JPEG"),
        ("image/class/text", label.encode()),
        ("image/filename", os.path.basename(path).encode()),
        ("image/source_id", path.encode()),
        ("image/key/sha256", digest.hex().encode()),
    ):
        feature[key].bytes_list.value.append(value)
    for key, number in (("image/class/label", 0), ("image/height", height), ("image/width", width)):
        feature[key].int64_list.value.append(number)
    feature["image/channels"].int64_list.value.append(3)
    return example.SerializeToString(deterministic=True)


_flushes = None  # a kept floor's process's flushing thread


def write_file(task: tuple[list[tuple[str, str]], str, bool]) -> int:
    """Every image of a task read, checked and framed into the task's file; the records."""
    global _flushes
    rows, out, kept = task
    if kept:  # protobuf's runtime, loaded once a task: the checked floor never loads it
        from tfrecord_pipeline.transforms.tfrecord.proto.example_pb2 import Example
    with open_new(out, 1 << 20) if kept else open(out, "wb") as sink:
        for path, label in rows:
            with open(path, "rb") as source:
                data = source.read()
            if kept:
                sink.write(frame(_example(path, label, data, Example)))
            else:
                _check(data)
                sink.write(frame(data))
    if kept:
        _flushes = _flushes or ThreadPoolExecutor(1)
        _flushes.submit(_flush, out)
    return len(rows)


def _flush(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def tasks(rows: list[tuple[str, str]], out: Path, kept: bool = False) -> list[tuple]:
    """The rows cut into contiguous runs of TASK_IMAGES, each with its file under `out`."""
    return [
        (rows[start : start + TASK_IMAGES], str(out / f"part-{start:09d}.tfrecord"), kept)
        for start in range(0, len(rows), TASK_IMAGES)
    ]


def run(manifest: str, out: Path, kept: bool = False) -> int:
    rows = list(_rows(manifest))
    with multiprocessing.get_context("fork").Pool(os.cpu_count()) as pool:
        count = sum(pool.imap_unordered(write_file, tasks(rows, out, kept)))
    if kept:  # what a process's thread had not flushed yet when the pool ended it
        os.sync()
    return count


if __name__ == "__main__":
    manifest, out = sys.argv[1:3]
    Path(out).mkdir(parents=True, exist_ok=True)
    run(manifest, Path(out), sys.argv[3:] == ["--kept"])
