"""What users would write instead of the converter; each runs as its own process.

    python benchmarks/peers.py NAME MANIFEST OUT_DIR
    python benchmarks/peers.py imports NAME     (only what NAME imports before its first image)

copy             read every file, append it to one output file (the I/O floor)
tf_loop          single-process loop: tf.train.Example + tf.io.TFRecordWriter
beam_tutorial    Create -> Map(build Example) -> WriteToTFRecord(num_shards=8), DirectRunner
pillow_resize    decode (reduced size), RGB, resize short side to 256 (bicubic), encode quality 90
turbo_vips       the same with libjpeg-turbo (simplejpeg: DCT-scaled decode, encode) and libvips'
                 bicubic reduce: the fastest libraries for that filter a user would pick
turbo_opencv     the same with OpenCV's INTER_AREA resize (one thread) in libvips' place
pillow_validate  reduced-size decode of every file, nothing written
validation_floor the least a converter's full validation does, and nothing else: read, SHA-256
                 (the key every record holds), libjpeg-turbo's luma decode at 1/8 (simplejpeg,
                 strict), nothing written; it bounds what any full validation can reach
refresh_floor    given a dataset root for OUT_DIR: the least a refresh of it does, and nothing
                 else: stat every image (the least that sees an image change without reading
                 it) and read the published version's rows files (benchmarks/refresh.py)
tfds_builder     what a TFDS user writes for their own images: a GeneratorBasedBuilder over the
                 manifest, download_and_prepare() into OUT_DIR (TFRecord shards)
ray_data         what a Ray Data user writes: read_binary_files -> map (the Example's columns)
                 -> write_tfrecords, Ray on this machine alone; needs Ray, which the project
                 never installs: run it with .venv-peers/bin/python (`make bench-peers`)
litdata_optimize LitData's optimize() and MosaicML Streaming's MDSWriter on a process pool,
mds_writer       as their docs write them (benchmarks/streaming_peers.py); .venv-peers too
"""

import csv
import hashlib
import importlib
import io
import json
import math
import os
import sys
from pathlib import Path

import streaming_peers


def _rows(manifest: str) -> list[tuple[str, str]]:
    """(image path, label) of every row, read as lean as Python reads a CSV."""
    base = os.path.dirname(manifest)
    with open(manifest, newline="") as handle:
        lines = csv.reader(handle)
        header = next(lines)
        path, label = header.index("image_uri"), header.index("label")
        return [(os.path.join(base, row[path]), row[label]) for row in lines]


def _label_ids(rows) -> dict[str, int]:
    """Each label's id: its place among the sorted labels, as the converter numbers them."""
    return {name: i for i, name in enumerate(sorted({label for _, label in rows}))}


def copy(rows, out: Path) -> None:
    with open(out / "all.bin", "wb") as sink:
        for path, _ in rows:
            with open(path, "rb") as source:
                sink.write(source.read())


def _example(path: str, label: int, text: str):
    with open(path, "rb") as handle:
        return example(handle.read(), label, text, os.path.basename(path))


def example(data: bytes, label: int, text: str, name: str) -> bytes:
    """The tf.train.Example a hand-written loop makes of an image: its bytes, label and name."""
    import tensorflow as tf

    def feature(value):
        if isinstance(value, int):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    features = {
        "image/encoded": feature(data),
        "image/format": feature(b"JPEG"),
        "image/class/label": feature(label),
        "image/class/text": feature(text.encode()),
        "image/filename": feature(name.encode()),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def tf_loop(rows, out: Path) -> None:
    import tensorflow as tf

    labels = _label_ids(rows)
    with tf.io.TFRecordWriter(str(out / "train.tfrecord")) as writer:
        for path, label in rows:
            writer.write(_example(path, labels[label], label))


def beam_tutorial(rows, out: Path) -> None:
    import apache_beam as beam

    labels = _label_ids(rows)
    with beam.Pipeline() as pipeline:
        (
            pipeline
            | beam.Create(rows)
            | beam.Map(lambda row: _example(row[0], labels[row[1]], row[1]))
            | beam.io.WriteToTFRecord(str(out / "train"), num_shards=8)
        )


def tfds_builder(rows, out: Path) -> None:
    import tensorflow_datasets as tfds

    class ManifestImages(tfds.core.GeneratorBasedBuilder):
        """The manifest's images and labels, one train split."""

        VERSION = tfds.core.Version("1.0.0")

        def _info(self) -> tfds.core.DatasetInfo:
            features = tfds.features.FeaturesDict(
                {
                    "image": tfds.features.Image(encoding_format="jpeg"),
                    "label": tfds.features.ClassLabel(names=sorted(_label_ids(rows))),
                    "key": tfds.features.Text(),
                }
            )
            return tfds.core.DatasetInfo(
                builder=self, features=features, supervised_keys=("image", "label")
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            for path, label in rows:  # a path: the Image feature reads the file's bytes as they are
                yield path, {"image": path, "label": label, "key": path}

    ManifestImages(data_dir=str(out)).download_and_prepare()


def ray_data(rows, out: Path) -> None:
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # Ray's documented switch: no usage report sent
    import ray

    labels, label_of = _label_ids(rows), dict(rows)

    def example(row: dict) -> dict:
        label = label_of[row["path"]]
        return {
            "image/encoded": row["bytes"],
            "image/class/label": labels[label],
            "image/class/text": label,
            "key": row["path"],
        }

    # One machine, every core, no dashboard; the node on loopback so nothing leaves the machine.
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, _node_ip_address="127.0.0.1")
    images = ray.data.read_binary_files([path for path, _ in rows], include_paths=True)
    images.map(example).write_tfrecords(str(out))
    ray.shutdown()  # the cluster's processes end before the measured process does


def pillow_resize(rows, out: Path, resample: str = "BICUBIC") -> None:
    from PIL import Image

    for path, _ in rows:
        image = Image.open(path)
        width, height = image.size
        factor = 256 / min(width, height)  # like the converter: shrink only, never upscale
        if factor < 1:
            image.draft("RGB", (math.ceil(width * factor), math.ceil(height * factor)))
        image = image.convert("RGB")
        if factor < 1:
            size = (round(width * factor), round(height * factor))
            image = image.resize(size, Image.Resampling[resample])
        image.save(io.BytesIO(), "JPEG", quality=90)


def _turbo(rows, resize) -> None:
    """pillow_resize with libjpeg-turbo (simplejpeg: DCT-scaled decode, encode) and
    `resize(pixels, (width, height))` for the filter."""
    import simplejpeg

    for path, _ in rows:
        with open(path, "rb") as handle:
            data = handle.read()
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
        factor = 256 / min(width, height)
        size = (round(width * factor), round(height * factor))
        step = 1  # the DCT scale Pillow's draft picks: 1/2, 1/4, 1/8 while it covers the size
        while step < 8 and width // (2 * step) >= size[0] and height // (2 * step) >= size[1]:
            step *= 2
        pixels = simplejpeg.decode_jpeg(
            data, min_height=-(-height // step), min_width=-(-width // step)
        )
        if factor < 1:
            pixels = resize(pixels, size)
        simplejpeg.encode_jpeg(pixels, 90, colorsubsampling="420")


def turbo_vips(rows, out: Path) -> None:
    import numpy as np
    import pyvips

    pyvips.concurrency_set(1)

    def resize(pixels, size):
        image = pyvips.Image.new_from_memory(pixels.data, *pixels.shape[1::-1], 3, "uchar")
        image = image.reduce(image.width / size[0], image.height / size[1], kernel="cubic")
        return np.frombuffer(image.write_to_memory(), np.uint8).reshape(size[1], size[0], 3)

    _turbo(rows, resize)


def turbo_opencv(rows, out: Path, interpolation: str = "INTER_AREA") -> None:
    """libjpeg-turbo and OpenCV's resize, one thread: INTER_AREA is OpenCV's filter for
    shrinking; INTER_LINEAR samples 2x2 pixels whatever the shrink (it aliases)."""
    import cv2

    cv2.setNumThreads(1)
    flag = getattr(cv2, interpolation)
    _turbo(rows, lambda pixels, size: cv2.resize(pixels, size, interpolation=flag))


def pillow_validate(rows, out: Path) -> None:
    from PIL import Image

    for path, _ in rows:
        image = Image.open(path)
        image.draft(image.mode, (max(1, image.width // 8), max(1, image.height // 8)))
        image.load()


def validation_floor(rows, out: Path) -> None:
    import simplejpeg

    for path, _ in rows:
        with open(path, "rb") as handle:
            data = handle.read()
        hashlib.sha256(data).digest()
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
        eighth = {"min_height": -(-height // 8), "min_width": -(-width // 8)}
        simplejpeg.decode_jpeg(data, "GRAY", strict=True, **eighth)


def refresh_floor(rows, root: Path) -> None:
    for path, _ in rows:
        os.stat(path)
    version = root / "versions" / json.loads((root / "LATEST").read_text())["version"]
    for rows_file in (version / "rows").iterdir():
        rows_file.read_bytes()


def litdata_optimize(rows, out: Path) -> None:
    streaming_peers.litdata_optimize(rows, _label_ids(rows), out)


def mds_writer(rows, out: Path) -> None:
    streaming_peers.mds_writer(rows, _label_ids(rows), out)


PEERS = {
    f.__name__: f
    for f in (
        copy,
        tf_loop,
        beam_tutorial,
        tfds_builder,
        ray_data,
        litdata_optimize,
        mds_writer,
        pillow_resize,
        turbo_vips,
        turbo_opencv,
        pillow_validate,
        validation_floor,
        refresh_floor,
    )
}

IMPORTS = {  # what a peer imports before its first image: `imports NAME` does that alone
    # TFDS imports TensorFlow only when a builder is made: before its first image all the same.
    "tfds_builder": lambda: [
        importlib.import_module(m) for m in ("tensorflow_datasets", "tensorflow")
    ],
    "ray_data": lambda: importlib.import_module("ray.data"),
    **streaming_peers.IMPORTS,
}

if __name__ == "__main__" and sys.argv[1] == "imports":
    IMPORTS[sys.argv[2]]()
elif __name__ == "__main__":
    name, manifest, out = sys.argv[1:4]
    Path(out).mkdir(parents=True, exist_ok=True)
    PEERS[name](_rows(manifest), Path(out))
