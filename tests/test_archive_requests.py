"""What an archive on Cloud Storage costs in requests, counted where they are sent (the fault
proxy, no faults, in front of the emulator): a folder of WebDataset shards kept in their order
is read with one request an archive, whatever its members; mixed, with one a member; refreshed,
an unchanged archive with none."""

import io
import tarfile
import urllib.parse
from pathlib import Path

from conftest import make_images

from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.storage import fileio

SHARDS, SAMPLES = 3, 100


def _shards(folder: Path, images: list[bytes]) -> None:
    """WebDataset shards (as webdataset.TarWriter lays them out) of SAMPLES samples each."""
    folder.mkdir()
    for shard in range(SHARDS):
        with tarfile.open(folder / f"{shard:06d}.tar", "w") as archive:
            for number in range(SAMPLES):
                key = f"{shard:02d}{number:04d}"
                image = images[(shard * SAMPLES + number) % len(images)]
                for suffix, data in (("jpg", image), ("cls", str(number % 3).encode())):
                    info = tarfile.TarInfo(f"{key}.{suffix}")
                    info.size, info.mtime = len(data), 1_700_000_000
                    archive.addfile(info, io.BytesIO(data))


def _uploaded(tmp_path: Path, gcs, name: str) -> tuple[list[bytes], str, list[str], str]:
    """The test's images, and its shards on the emulator: their folder, objects and prefix."""
    make_images(tmp_path, per_class=4)
    images = [path.read_bytes() for path in sorted((tmp_path / "images").rglob("*.jpg"))]
    _shards(tmp_path / "shards", images)
    prefix = f"{tmp_path.name}-{name}"
    names = [f"{prefix}/{shard:06d}.tar" for shard in range(SHARDS)]
    return images, gcs(tmp_path / "shards", prefix), names, prefix


def _requests(proxy, name: str) -> int:
    """Requests sent naming the object `name` (as the JSON API quotes it in a path)."""
    quoted = urllib.parse.quote(name, safe="")
    return sum(count for (_, target), count in proxy._sent.items() if f"/o/{quoted}" in target)


def _convert(root: str, output: Path, *flags: str):
    argv = ["--manifest", f"{root}/", "--output", str(output), "--num_shards", "2"]
    return run([*argv, "--no_progress", *flags])


def test_shards_kept_in_order_cost_one_request_an_archive_mixed_one_a_member(
    tmp_path, gcs, faulty_gcs
):
    images, root, names, prefix = _uploaded(tmp_path, gcs, "wds")

    proxy = faulty_gcs(f"{prefix}/")  # no faults: it counts the requests
    kept = _convert(root, tmp_path / "kept", "--archive_order", "keep")
    assert kept.info.errors_by_reason == {}
    assert kept.info.records == SHARDS * SAMPLES
    # The launcher takes the sizes from the folder's listing; the listing reads each archive as
    # one stream, copying it into the run's staging folder, which the shards' runs read.
    assert [_requests(proxy, name) for name in names] == [1] * SHARDS

    proxy = faulty_gcs(f"{prefix}/")
    mixed = _convert(root, tmp_path / "mixed")
    assert mixed.info.records == SHARDS * SAMPLES
    # The listing's one stream (labels read as it passes them), then a ranged read a member.
    assert [_requests(proxy, name) for name in names] == [1 + SAMPLES] * SHARDS


def test_a_refresh_reads_no_unchanged_archive_and_a_changed_one_once(tmp_path, gcs, faulty_gcs):
    """--incremental carries an archive whose size and CRC-32C (from the folder's listing) are
    the published version's without a request naming it; a rewritten one is streamed."""
    images, root, names, prefix = _uploaded(tmp_path, gcs, "nightly")
    output = tmp_path / "nightly"
    _convert(root, output, "--archive_order", "keep")

    proxy = faulty_gcs(f"{prefix}/")
    carried = _convert(root, output, "--archive_order", "keep", "--incremental")
    assert [_requests(proxy, name) for name in names] == [0] * SHARDS
    assert carried.info.refresh["carried"] == carried.info.records == SHARDS * SAMPLES

    _shards(tmp_path / "rewritten", images[1:])  # every member of every shard changed
    changed = tmp_path / "rewritten" / "000001.tar"
    fileio.write_durably(f"{root}/000001.tar", changed.read_bytes())
    proxy = faulty_gcs(f"{prefix}/")
    refreshed = _convert(root, output, "--archive_order", "keep", "--incremental")
    assert [_requests(proxy, name) for name in names] == [0, 1, 0]
    assert refreshed.info.refresh["converted"] == SAMPLES
    assert refreshed.info.records == SHARDS * SAMPLES
