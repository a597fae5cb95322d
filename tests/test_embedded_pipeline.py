"""Containers unpacked while listed, converted end to end on both runners: a Hugging Face
Parquet file, a `save_to_disk` folder and a .tar.gz give the same shards on the local runner
and the DirectRunner, read back with TensorFlow, ClassLabel names at their ids."""

import io
import json
import tarfile

import pytest
import tensorflow as tf
from conftest import BEAM, encode, error_rows, photo, published, version_files
from test_embedded import NAMES, hf_table, write_arrow_stream

from tfrecord_pipeline.dataset.versions import STAGING
from tfrecord_pipeline.runners.convert import run

pytestmark = pytest.mark.slow
IMAGES = [encode(photo(name), "PNG") for name in ("astronaut.png", "camera.png", "coffee.png")]


def _convert(manifest, root, *flags):
    run(["--manifest", str(manifest), "--output", str(root), "--no_progress", *flags])
    assert not list((root / STAGING).iterdir())  # the unpacked files went with the run
    return published(root)


def _labels(version):
    records = tf.data.TFRecordDataset(sorted(str(p) for p in version.glob("train-*.tfrecord")))
    spec = {"image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    return sorted(int(tf.io.parse_single_example(r, spec)["image/class/label"]) for r in records)


def _hf_folder(tmp_path):
    folder = tmp_path / "hf_dataset"
    folder.mkdir()
    write_arrow_stream(hf_table(IMAGES, [2, 0, 2]), folder / "data-00000-of-00001.arrow")
    state = {"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}
    (folder / "state.json").write_text(json.dumps(state))
    return folder


def _tgz(tmp_path):
    path = tmp_path / "pets.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [
            ("cat/a.png", IMAGES[0]),
            ("dog/b.png", IMAGES[1]),
            ("dog/c.png", b"x" * (2 << 20)),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("make", ["parquet", "folder", "tgz"])
def test_both_runners_write_the_same_shards_with_the_datasets_label_ids(tmp_path, make):
    if make == "parquet":
        import pyarrow.parquet as pq

        manifest = tmp_path / "hf.parquet"
        pq.write_table(hf_table(IMAGES, [2, 0, 2]), manifest)
    else:
        manifest = _hf_folder(tmp_path) if make == "folder" else _tgz(tmp_path)
    flags = ("--max_file_mb", "1", "--max_error_rate", "1")
    local = _convert(manifest, tmp_path / "local", *flags)
    beam = _convert(manifest, tmp_path / "beam", *flags, *BEAM)
    assert version_files(local) == version_files(beam)
    names = (local / "labels.txt").read_text().splitlines()
    if make == "tgz":
        assert names == ["cat", "dog"] and _labels(local) == [0, 1]
        assert [row["reason"] for row in error_rows(local)] == ["file_too_large"]
    else:
        assert names == NAMES and _labels(local) == [0, 2, 2]
