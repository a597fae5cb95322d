"""`--incremental` over a folder of archives, through the CLI on both runners: an archive
whose identity is the published version's is carried without being read (its bytes replaced
by zeros of the same size and time, which a listing would refuse), a rewritten one converts
only its changed members, one that gave an error row is listed again, and a damaged published
shard makes its archives listed after all (transforms/plan/carried.py)."""

import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from conftest import RUNNERS, make_images

from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.plan.carried import ARCHIVES_FILE

SHARDS, SAMPLES = 3, 6


def _images(root: Path) -> list[bytes]:
    make_images(root, per_class=6)
    return [path.read_bytes() for path in sorted((root / "images").rglob("*.jpg"))]


def _shard(path: Path, samples: list[tuple[str, bytes, int]]) -> None:
    """A WebDataset shard: `key.jpg` and `key.cls` a sample, each member dated by its bytes."""
    with tarfile.open(path, "w") as archive:
        for key, image, label in samples:
            for suffix, data in (("jpg", image), ("cls", str(label).encode())):
                info = tarfile.TarInfo(f"{key}.{suffix}")
                info.size, info.mtime = len(data), 1_700_000_000 + len(data)
                archive.addfile(info, io.BytesIO(data))


def _samples(images: list[bytes], shard: int) -> list[tuple[str, bytes, int]]:
    return [(f"{shard}{n:03d}", images[shard * SAMPLES + n], n % 3) for n in range(SAMPLES)]


@pytest.fixture
def shards(tmp_path) -> Path:
    images = _images(tmp_path)
    folder = tmp_path / "shards"
    folder.mkdir()
    for shard in range(SHARDS):
        _shard(folder / f"{shard:06d}.tar", _samples(images, shard))
    return folder


def _convert(shards: Path, output: Path, runner: str, *flags: str):
    argv = ["--manifest", str(shards), "--output", str(output), "--num_shards", "2"]
    return run([*argv, "--no_progress", *RUNNERS[runner], *flags])


def _records(folder: str) -> dict[str, bytes]:
    """key → image bytes of every record, read with TensorFlow."""
    import tensorflow as tf

    spec = {
        "image/source_id": tf.io.FixedLenFeature([], tf.string),
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
    }
    found = {}
    for record in tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(f"{folder}/train-*"))):
        example = tf.io.parse_single_example(record, spec)
        found[example["image/source_id"].numpy().decode()] = example["image/encoded"].numpy()
    return found


def _blanked(path: Path) -> None:
    """Zeros in place of its bytes, its size and modification time kept: its identity is the
    same, and any read of it finds no archive."""
    status = path.stat()
    path.write_bytes(bytes(status.st_size))
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_an_unchanged_archive_is_carried_unread_a_rewritten_one_by_its_members(
    tmp_path, shards, runner, capfd
):
    output = tmp_path / "nightly"
    first = _convert(shards, output, runner)
    published = _records(first.folder)
    _blanked(shards / "000000.tar")
    samples = _samples(_images(tmp_path / "more"), 1)
    changed = (samples[2][0], published["000000.tar#0000.jpg"], samples[2][2])
    _shard(shards / "000001.tar", [*samples[:2], changed, *samples[3:]])
    capfd.readouterr()

    refreshed = _convert(shards, output, runner, "--incremental")
    assert "2 of 3 archives unchanged" in capfd.readouterr().err
    assert refreshed.info.errors == 0
    assert refreshed.info.refresh["converted"] == 1
    assert refreshed.info.refresh["carried"] + refreshed.info.refresh["rewritten"] == 17
    records = _records(refreshed.folder)
    key = f"000001.tar#{changed[0]}.jpg"
    assert records[key] == changed[1] != published[key]
    assert {k: v for k, v in records.items() if k != key} == {
        k: v for k, v in published.items() if k != key
    }
    assert verify(str(output), "all") == (SHARDS * SAMPLES, [])
    lines = [
        json.loads(line) for line in Path(refreshed.folder, ARCHIVES_FILE).read_text().splitlines()
    ]
    assert [line["rows"] for line in lines] == [{"train": SAMPLES}] * SHARDS


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_a_damaged_published_shard_has_its_carried_archives_listed_after_all(
    tmp_path, shards, runner
):
    output = tmp_path / "nightly"
    first = _convert(shards, output, runner)
    published = _records(first.folder)
    shard = sorted(Path(first.folder).glob("train-*"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))

    refreshed = _convert(shards, output, runner, "--incremental")
    assert refreshed.info.refresh["damaged"] == [shard.name]
    assert refreshed.info.refresh["reconverted"] > 0
    assert _records(refreshed.folder) == published
    assert verify(str(output), "all") == (SHARDS * SAMPLES, [])


def test_an_archive_that_gave_an_error_row_is_listed_again(tmp_path, shards, capfd):
    samples = _samples(_images(tmp_path / "more"), 2)
    _shard(shards / "000002.tar", [*samples[:-1], (samples[-1][0], b"not a jpeg", 0)])
    output = tmp_path / "nightly"
    assert _convert(shards, output, "local", "--max_error_rate", "0.5").info.errors == 1
    capfd.readouterr()

    refreshed = _convert(shards, output, "local", "--max_error_rate", "0.5", "--incremental")
    assert "2 of 3 archives unchanged" in capfd.readouterr().err
    assert refreshed.info.errors_by_reason == {"not_an_image": 1}
    assert refreshed.info.records == SHARDS * SAMPLES - 1
