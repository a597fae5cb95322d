"""Hostile sizes through the command, as a user runs it (its shard writers forked, every core):
thousands of shards, thousands of splits, the TPU preset's 1,152 ArrayRecord shards, and split
names too long for a file. Each run has a timeout: a hang fails the test, it does not stall the
suite."""

import csv
import json
import random
from pathlib import Path

import pytest
from conftest import command, crop, encode, error_rows, photo, published

pytestmark = pytest.mark.slow

ROWS = 5000
TIMEOUT_S = 240  # each run takes well under a minute here


@pytest.fixture(scope="module")
def tiles(tmp_path_factory) -> Path:
    """ROWS distinct small JPEGs cut from a committed photo, under a folder of their own."""
    root = tmp_path_factory.mktemp("tiles")
    (root / "img").mkdir()
    rng, source = random.Random(3), photo("coffee.png")
    for index in range(ROWS):
        (root / "img" / f"{index}.jpg").write_bytes(encode(crop(source, rng, 16), quality=80))
    return root


def _manifest(root: Path, name: str, rows: int, split=None) -> Path:
    """A CSV of the first `rows` tiles, labelled by five classes; `split(index)` its split."""
    path = root / name
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["image_uri", "label", *(["split"] if split else [])])
        for index in range(rows):
            extra = [split(index)] if split else []
            writer.writerow([f"img/{index}.jpg", f"c{index % 5}", *extra])
    return path


def _convert(manifest: Path, output: Path, *flags: str):
    ran = command(
        "convert", "--manifest", manifest, "--output", output, "--no_progress", *flags,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return json.loads((published(output) / "tfrecord_pipeline.json").read_text())


def _shards(info: dict) -> list[dict]:
    return [shard for split in info["splits"].values() for shard in split["shards"]]


def test_five_thousand_shards_are_written_and_read_back(tiles, tmp_path):
    """A queue of the shards started, read only when a worker died, filled after ~1,150
    shards and blocked every worker: the run never ended."""
    import tensorflow as tf

    manifest = _manifest(tiles, "many-shards.csv", ROWS)
    info = _convert(manifest, tmp_path / "out", "--num_shards", str(ROWS))
    assert len(_shards(info)) == ROWS and info["records"] == ROWS
    files = sorted(str(path) for path in published(tmp_path / "out").glob("train-*.tfrecord"))
    assert len(files) == ROWS
    assert sum(1 for _ in tf.data.TFRecordDataset(files)) == ROWS


def test_two_thousand_splits_each_of_one_row(tiles, tmp_path):
    manifest = _manifest(tiles, "many-splits.csv", 2000, split=lambda index: f"s{index}")
    info = _convert(manifest, tmp_path / "out")
    assert len(info["splits"]) == 2000
    assert {split["examples"] for split in info["splits"].values()} == {1}


def test_the_tpu_preset_writes_its_1152_array_record_shards(tiles, tmp_path):
    manifest = _manifest(tiles, "tpu.csv", 3000)
    flags = ["--preset", "tpu-imagenet", "--file_format", "array_record"]
    info = _convert(manifest, tmp_path / "out", *flags, "--split", "train=0.9,validation=0.1")
    counts = {name: len(split["shards"]) for name, split in info["splits"].items()}
    assert counts == {"train": 1024, "validation": 128}
    assert info["records"] == 3000
    assert len(list(published(tmp_path / "out").glob("*.array_record"))) == 1152


def test_a_split_name_too_long_for_a_file_is_an_error_row(tiles, tmp_path):
    """194 characters made a staged file's name too long: the run failed with a traceback and
    published nothing. Now the row is rejected and the others publish."""
    manifest = _manifest(tiles, "long-split.csv", 200, split=lambda i: "s" * 194 if i else "")
    info = _convert(manifest, tmp_path / "out", "--max_error_rate", "1")
    assert info["records"] == 1 and info["errors_by_reason"] == {"bad_split": 199}
    (first, *_) = error_rows(published(tmp_path / "out"))
    assert "at most 64 characters" in first["message"] and len(first["message"]) < 200
