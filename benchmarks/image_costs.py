"""Where one image's CPU goes on the local writer: `python benchmarks/image_costs.py [N]` (the
benchmark corpus of N images, 2,000 by default).

Each stage is timed alone, in one thread of this process, as CPU time (user + system) per image
over the N images, the median of 5 rounds: the stages the shard writer runs for a pass-through
image (read the file, walk the JPEG's markers, the scans' check: libjpeg-turbo's strict luma
decode at 1/8, SHA-256 for `image/key/sha256`, encode the Example, frame + CRC-32C + buffered
write), the whole writer for comparison, the copy floor's own work (read, append), the same luma
through Pillow's decoder and the Pillow validate peer's decode. The images are held in memory
for every stage but the reads. Then a resize to a short side of 256 (bilinear, quality 90) on
one worker: the whole writer against the loops users write instead, with the same filter
(peers.py: Pillow; libjpeg-turbo with OpenCV's shrinking filter, INTER_AREA, and with its
INTER_LINEAR, which aliases), each reading its files. Writes
benchmarks/results/image-costs.json and prints the README's tables.
"""

import collections
import hashlib
import io
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import simplejpeg
from corpus import make_corpus
from dataflow_costs import cpu_us_per
from peers import pillow_resize, turbo_opencv
from PIL import Image

from tfrecord_pipeline.transforms.image.config import ImageConfig
from tfrecord_pipeline.transforms.image.files import read_image
from tfrecord_pipeline.transforms.image.images import normalise
from tfrecord_pipeline.transforms.image.jpeg import parse_jpeg
from tfrecord_pipeline.transforms.image.scans import check_scans
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig
from tfrecord_pipeline.transforms.manifest.sources import check_manifests, read_all
from tfrecord_pipeline.transforms.plan.sharding import ShardId
from tfrecord_pipeline.transforms.tfrecord.examples import build_example, encode_example
from tfrecord_pipeline.transforms.tfrecord.records import ShardFileWriter
from tfrecord_pipeline.transforms.write.shard_writer import WriteConfig, write_shard

HERE = Path(__file__).resolve().parent
ROUNDS = 5
RESIZE = ImageConfig(resize_short_side=256, resample="bilinear", jpeg_quality=90)
WRITER_RESIZING = "the whole shard writer, resize 256 bilinear q90"
# (ratio, numerator stage, denominator stage, target): CPU an image, the lower the faster.
# INTER_LINEAR has none: it samples 2x2 pixels at any shrink, so it aliases where the writer's
# bilinear (Pillow's, widened by the shrink) does not (resample_study.py); reported only.
RATIOS = (
    ("resize: writer / Pillow loop", "the Pillow loop, bilinear", WRITER_RESIZING, 1.1),
    (
        "resize: writer / turbo + OpenCV area",
        "libjpeg-turbo + OpenCV INTER_AREA",
        WRITER_RESIZING,
        0.95,
    ),
    (
        "resize: writer / turbo + OpenCV linear",
        "libjpeg-turbo + OpenCV INTER_LINEAR",
        WRITER_RESIZING,
        None,
    ),
)


def _luma_eighth_pillow(data: bytes) -> None:
    """Pillow's decoder called directly on the whole buffer, luma at 1/8 (it cannot report
    libjpeg's warnings, so the check cannot use it)."""
    height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    Image.frombytes("L", (-(-width // 8), -(-height // 8)), data, "jpeg", "L", "", 8, 0)


def _pillow_validate_peer(data: bytes) -> None:
    image = Image.open(io.BytesIO(data))
    image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
    image.load()


def stages(rows, out: str) -> dict:
    """Each stage's work over every row, as functions of no argument."""
    datas = [read_image(row.image_uri, 1 << 30)[0] for row in rows]
    infos = [parse_jpeg(data) for data in datas]
    stored = [normalise(data, ImageConfig()) for data in datas]
    features = [
        {
            "image/encoded": data,
            "image/format": "JPEG",
            "image/class/label": 1,
            "image/class/text": row.label,
            "image/height": s.height,
            "image/width": s.width,
            "image/channels": 3,
            "image/filename": os.path.basename(row.image_uri),
            "image/source_id": row.key,
            "image/key/sha256": hashlib.sha256(data).hexdigest(),
        }
        for row, data, s in zip(rows, datas, stored, strict=True)
    ]
    records = [encode_example(f) for f in features]
    labels = LabelMap(tuple(sorted({row.label for row in rows})))

    def framed_and_written() -> None:
        with open(os.path.join(out, "framed"), "wb", buffering=1 << 20) as handle:
            writer = ShardFileWriter(handle)
            for record in records:
                writer.write(record)

    def copied() -> None:
        with open(os.path.join(out, "copied"), "wb") as sink:
            for row in rows:
                with open(row.image_uri, "rb") as source:
                    sink.write(source.read())

    def writes(config: ImageConfig):
        return lambda: collections.deque(
            write_shard(ShardId("train", 0, 1), rows, labels, WriteConfig(out, config)), maxlen=0
        )

    pairs = [(row.image_uri, row.label) for row in rows]

    def each(function, items):
        """Calls `function` on each item, keeping no result: a list of them would cost the
        stage its memory's page faults, which the writer (one image at a time) never pays."""
        return lambda: collections.deque(map(function, items), maxlen=0)

    return {
        "read the file (open, fstat, read, close)": each(
            lambda row: read_image(row.image_uri, 1 << 30), rows
        ),
        "walk the JPEG's markers (the structure check)": each(parse_jpeg, datas),
        "SHA-256 of the image (image/key/sha256)": each(
            lambda data: hashlib.sha256(data).hexdigest(), datas
        ),
        "encode the Example": each(encode_example, features),
        "build the Example (SHA-256 and encoding)": each(
            lambda image: build_example(image, {"image/class/label": 1}, "x.jpg", "x", ()), stored
        ),
        "frame, CRC-32C, buffered write": framed_and_written,
        "the whole shard writer, pass-through": writes(ImageConfig()),
        "the copy floor's work (read, append)": copied,
        "the scans' check: libjpeg-turbo's strict luma decode at 1/8 (simplejpeg)": each(
            lambda pair: check_scans(*pair), list(zip(datas, infos, strict=True))
        ),
        "the same luma through Pillow's decoder, called directly": each(_luma_eighth_pillow, datas),
        "the Pillow validate peer's decode (draft 1/8, file's mode)": each(
            _pillow_validate_peer, datas
        ),
        WRITER_RESIZING: writes(RESIZE),
        "the Pillow loop, bilinear": lambda: pillow_resize(pairs, Path(out), "BILINEAR"),
        "libjpeg-turbo + OpenCV INTER_AREA": lambda: turbo_opencv(pairs, Path(out)),
        "libjpeg-turbo + OpenCV INTER_LINEAR": lambda: turbo_opencv(
            pairs, Path(out), "INTER_LINEAR"
        ),
    }


def measure(count: int) -> list[dict]:
    """Every stage's CPU an image, in each of ROUNDS rounds."""
    corpus_root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    corpus = make_corpus(corpus_root / f"tfrp-corpus-{count}", count)
    (manifest,) = check_manifests([str(corpus)], ReadConfig())
    rows = list(read_all(manifest, ReadConfig()))
    with tempfile.TemporaryDirectory() as out:
        work = stages(rows, out)
        return [
            {name: cpu_us_per(len(rows), run) for name, run in work.items()} for _ in range(ROUNDS)
        ]


def medians(rounds: list[dict]) -> dict:
    """Each stage's median over the rounds."""
    return {name: round(statistics.median(r[name] for r in rounds), 1) for name in rounds[0]}


def ratios(rounds: list[dict]) -> dict:
    """Each of RATIOS: how many times faster the writer is than the loop (above 1: faster),
    the median of the rounds' ratios: each round's pair ran minutes apart at most, so a slow
    spell of a shared machine moves both."""
    return {
        label: round(statistics.median(r[loop] / r[ours] for r in rounds), 3)
        for label, loop, ours, _ in RATIOS
    }


def markdown(rounds: list[dict]) -> str:
    lines = ["| stage | CPU per image |", "|---|---:|"]
    lines += [f"| {name} | {us:,.1f} us |" for name, us in medians(rounds).items()]
    lines += ["", "| ratio | measured | target |", "|---|---:|---:|"]
    measured = ratios(rounds)
    lines += [
        f"| {label} | {measured[label]:.2f} | {'—' if target is None else f'≥ {target}'} |"
        for label, *_, target in RATIOS
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rounds = measure(count)
    print(markdown(rounds))
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "images": count,
        "cpu_us_per_image": medians(rounds),
        "ratios": ratios(rounds),
    }
    (HERE / "results" / "image-costs.json").write_text(json.dumps(report, indent=2) + "\n")
