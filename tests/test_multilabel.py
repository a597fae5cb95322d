"""Several labels an image (--multi_label): rows, records, both runners, refresh and load()."""

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from conftest import (
    BEAM,
    command,
    error_rows,
    make_images,
    published,
    version_files,
    write_manifest,
)

from tfrecord_pipeline import load
from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.metadata import INFO_FILE, LABELS_FILE, DatasetInfo

ROOT = Path(__file__).resolve().parents[1]


def _convert(manifest, output, *flags) -> None:
    argv = ["convert", "--manifest", str(manifest), "--output", str(output), "--no_progress"]
    assert main([*argv, "--multi_label", "--num_shards", "2", *flags]) == 0


def _records(version):
    info = DatasetInfo.from_json((version / INFO_FILE).read_text())
    spec = {
        key: tf.io.VarLenFeature(tf.as_dtype(dtype))
        if key in info.list_features
        else tf.io.FixedLenFeature([], tf.as_dtype(dtype))
        for key, dtype in info.features.items()
    }
    files = [str(version / shard.file) for split in info.splits.values() for shard in split.shards]
    for record in tf.data.TFRecordDataset(files):
        example = tf.io.parse_single_example(record, spec)
        yield {
            key: tf.sparse.to_dense(value).numpy().tolist()
            if isinstance(value, tf.SparseTensor)
            else value.numpy()
            for key, value in example.items()
        }


@pytest.fixture
def tagged(tmp_path):
    """20 images, tagged by source photo plus a tag of their own for some; one with none."""
    rows = make_images(tmp_path)
    for number, row in enumerate(rows):
        tags = [row["label"], "even" if number % 2 else "odd"][: 1 + number % 3 % 2]
        row["label"] = tags if number else []
    return write_manifest(tmp_path / "tags.jsonl", rows), rows


def test_records_hold_the_ids_and_texts_of_every_label_the_same_on_both_runners(tmp_path, tagged):
    manifest, rows = tagged
    _convert(manifest, tmp_path / "local")
    _convert(manifest, tmp_path / "beam", *BEAM)
    local, beam = published(tmp_path / "local"), published(tmp_path / "beam")
    assert version_files(local) == version_files(beam)

    info = json.loads((local / INFO_FILE).read_text())
    names = (local / LABELS_FILE).read_text().splitlines()
    assert info["list_features"] == ["image/class/label", "image/class/text"]
    wanted = {row["image_uri"]: sorted(set(row["label"])) for row in rows}
    for record in _records(local):
        labels = wanted.pop(record["image/source_id"].decode())
        assert record["image/class/label"] == sorted(names.index(label) for label in labels)
        assert [text.decode() for text in record["image/class/text"]] == sorted(labels)
    assert not wanted
    counts = {names[int(i)]: n for i, n in info["splits"]["train"]["label_counts"].items()}
    assert counts == {
        name: sum(name in row["label"] for row in rows) for name in names
    }  # records holding each label
    assert main(["verify", str(tmp_path / "local"), "--decode", "all"]) == 0


def test_load_gives_multi_hot_vectors_and_ragged_features(tmp_path, tagged):
    manifest, rows = tagged
    _convert(manifest, tmp_path / "out", "--label_offset", "1")
    names = (published(tmp_path / "out") / LABELS_FILE).read_text().splitlines()
    dataset = load(str(tmp_path / "out"), batch_size=None, image_size=(32, 32), shuffle_buffer=0)
    features = load(
        str(tmp_path / "out"),
        batch_size=4,
        image_size=(32, 32),
        shuffle_buffer=0,
        with_features=True,
        drop_remainder=False,
    )
    keys = [key.decode() for batch in features for key in batch["image/source_id"].numpy()]
    wanted = {row["image_uri"]: row["label"] for row in rows}
    for key, (image, hot) in zip(keys, dataset, strict=True):
        expected = np.zeros(len(names) + 1, np.float32)  # id 0 is below the offset: never hot
        expected[[names.index(label) + 1 for label in wanted[key]]] = 1
        assert image.shape == (32, 32, 3) and hot.numpy().tolist() == expected.tolist()
    batch = next(iter(features))
    assert isinstance(batch["image/class/label"], tf.RaggedTensor)


def test_a_refresh_keeps_the_records_and_converts_a_row_whose_labels_changed(tmp_path, tagged):
    manifest, rows = tagged
    _convert(manifest, tmp_path / "out")
    first = published(tmp_path / "out")
    rows[3]["label"] = ["rocket", "new"]
    write_manifest(manifest, rows)
    _convert(manifest, tmp_path / "out", "--incremental")
    refreshed = published(tmp_path / "out")
    _convert(manifest, tmp_path / "full")
    full = json.loads((published(tmp_path / "full") / INFO_FILE).read_text())
    info = json.loads((refreshed / INFO_FILE).read_text())
    names = [
        (folder / LABELS_FILE).read_text().splitlines()
        for folder in (first, refreshed, published(tmp_path / "full"))
    ]
    assert names[1] == [*names[0], "new"]  # ids inherited, the new label appended
    old = {name: i for i, name in enumerate(names[2])}  # (a full run sorts it in)
    new = {name: i for i, name in enumerate(names[1])}
    count = {new[name]: full["splits"]["train"]["label_counts"][str(i)] for name, i in old.items()}
    assert info["splits"]["train"]["label_counts"] == {str(k): v for k, v in sorted(count.items())}
    by_key = {r["image/source_id"].decode(): r for r in _records(refreshed)}
    assert by_key[rows[3]["image_uri"]]["image/class/text"] == [b"rocket", b"new"]  # id order
    full_texts = {
        r["image/source_id"]: set(r["image/class/text"])
        for r in _records(published(tmp_path / "full"))
    }
    assert {key.encode(): set(r["image/class/text"]) for key, r in by_key.items()} == full_texts


def test_a_csv_cell_a_parquet_list_and_a_jsonl_list_give_the_same_records(tmp_path):
    rows = make_images(tmp_path, per_class=2)
    for row in rows:
        row["label"] = [row["label"], "photo"]
    write_manifest(tmp_path / "a.csv", [{**r, "label": ";".join(r["label"])} for r in rows])
    write_manifest(tmp_path / "a.jsonl", rows)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "a.parquet")
    versions = []
    for name, flags in (("a.csv", ("--label_separator", ";")), ("a.jsonl", ()), ("a.parquet", ())):
        _convert(tmp_path / name, tmp_path / name.replace(".", "-"), *flags)
        versions.append(published(tmp_path / name.replace(".", "-")))
    shards = [
        {p.name: p.read_bytes() for p in version.glob("train-*")} for version in versions
    ]  # the records alike; the rows files and metadata name their manifests
    assert shards[0] == shards[1] == shards[2]


def test_the_sample_tags_convert_as_the_readme_says(tmp_path):
    shutil.copytree(ROOT / "sample", tmp_path / "sample")
    _convert(tmp_path / "sample" / "tags.jsonl", tmp_path / "out")
    info = json.loads((published(tmp_path / "out") / INFO_FILE).read_text())
    assert info["records"] == 40 and info["labels"]["count"] == 7


def test_a_list_of_labels_without_multi_label_names_the_flag(tmp_path):
    """The repository's own tags.jsonl without --multi_label: every row rejected, and each
    error said only that a label must be text or an integer."""
    tags = Path(__file__).resolve().parents[1] / "sample" / "tags.jsonl"
    done = command("convert", "--manifest", tags, "--output", tmp_path / "o", "--no_progress")
    assert done.returncode == 1, done.stderr
    rows = error_rows(next((tmp_path / "o" / "versions").iterdir()))
    assert rows[0]["message"] == (
        "label must be text or an integer, not ['person', 'space']; several labels an image: "
        "--multi_label"
    )
    assert {row["reason"] for row in rows} == {"bad_label"}
