"""What users write to turn an archive of images into TFRecords, and the inputs they start from,
each run as its own process: `python benchmarks/archive_peers.py NAME INPUT OUT`.

tar_loop    a tar of class folders (`label/name.jpg`): iterate its members with `tarfile`,
            build a tf.train.Example (the image's bytes, label id, label text, file name) and
            write it with tf.io.TFRecordWriter: what a user writes by hand
hf_loop     a Parquet file with a Hugging Face `datasets` Image feature: Dataset.from_parquet,
            the image column left undecoded, each row's bytes and label into a
            tf.io.TFRecordWriter. (`Dataset.export(path, format="tfrecord")`, removed in
            datasets 3.0, never wrote images: in 2.21 it refuses an Image column and a binary
            column alike, "cannot be serialized", so a user writes this loop instead.)
hf_parquet  make that Parquet file from a CSV manifest (image_uri,label) with `datasets`
wds_shards  make WebDataset shards (key.jpg + key.cls) from a CSV manifest with
            webdataset.TarWriter, INPUT's images in shards of 100

hf_loop, hf_parquet and wds_shards need packages the project never installs: run them with
.venv-peers/bin/python (`make bench-peers` makes it).
"""

import csv
import os
import sys
import tarfile
from pathlib import Path

from peers import example

SHARD_IMAGES = 100  # a WebDataset shard's samples


def manifest_rows(manifest: str) -> list[tuple[str, str]]:
    """(image path, label) of every row of a CSV manifest."""
    base = os.path.dirname(manifest)
    with open(manifest, newline="") as handle:
        return [(os.path.join(base, r["image_uri"]), r["label"]) for r in csv.DictReader(handle)]


def label_ids(labels) -> dict[str, int]:
    """Each label's id: its place among the sorted labels, as the converter numbers them."""
    return {name: i for i, name in enumerate(sorted(set(labels)))}


def tar_loop(tar: str, out: Path) -> None:
    import tensorflow as tf

    with tarfile.open(tar) as archive:
        members = [m for m in archive.getmembers() if m.isfile()]
        labels = label_ids(m.name.split("/")[-2] for m in members)
        with tf.io.TFRecordWriter(str(out / "train.tfrecord")) as writer:
            for member in members:
                label = member.name.split("/")[-2]
                data = archive.extractfile(member).read()
                writer.write(example(data, labels[label], label, member.name))


def hf_loop(parquet: str, out: Path) -> None:
    import datasets
    import tensorflow as tf

    dataset = datasets.Dataset.from_parquet(parquet)
    dataset = dataset.cast_column("image", datasets.Image(decode=False))
    names = dataset.features["label"].names
    with tf.io.TFRecordWriter(str(out / "train.tfrecord")) as writer:
        for row in dataset:
            image = row["image"]
            label = row["label"]
            writer.write(example(image["bytes"], label, names[label], image["path"] or ""))


def hf_parquet(manifest: str, out: Path) -> None:
    import datasets

    rows = manifest_rows(manifest)
    names = sorted(label_ids(label for _, label in rows))
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=names)}
    )
    images = [{"bytes": Path(path).read_bytes(), "path": Path(path).name} for path, _ in rows]
    labels = [names.index(label) for _, label in rows]
    dataset = datasets.Dataset.from_dict({"image": images, "label": labels}, features=features)
    dataset.to_parquet(str(out / "images.parquet"))


def wds_shards(manifest: str, out: Path) -> None:
    import webdataset

    rows = manifest_rows(manifest)
    ids = label_ids(label for _, label in rows)
    for start in range(0, len(rows), SHARD_IMAGES):
        shard = out / f"shard-{start // SHARD_IMAGES:06d}.tar"
        with webdataset.TarWriter(str(shard)) as sink:
            for path, label in rows[start : start + SHARD_IMAGES]:
                key = Path(path).stem
                sink.write({"__key__": key, "jpg": Path(path).read_bytes(), "cls": ids[label]})


PEERS = {f.__name__: f for f in (tar_loop, hf_loop, hf_parquet, wds_shards)}

if __name__ == "__main__":
    name, source, out = sys.argv[1:4]
    Path(out).mkdir(parents=True, exist_ok=True)
    PEERS[name](source, Path(out))
