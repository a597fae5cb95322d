"""A folder of hostile archives beside good ones, converted by the command as a user runs it:
every hostile member (or the rest of its archive) is an error row with its reason code, every
good image is a record read back by TensorFlow, rows in = records out + error rows, nothing is
written outside the output folder, and the exit status is the documented one. The same folder
on Beam's DirectRunner gives the same shards. Each run has a timeout: a hang fails the test."""

import json
import random
import tarfile
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from archive_data import (
    encrypted,
    looping_tar,
    lying_size,
    nested_tar,
    overlapping,
    tar_bytes,
    tar_header,
    tar_member,
    zip_bytes,
)
from conftest import BEAM, command, crop, encode, error_rows, photo, published

from tfrecord_pipeline.dataset.metadata import INFO_FILE

TIMEOUT_S = 300  # each run takes seconds here
MANY = 0x10000 + 1  # members of many.zip: more than a zip's 16-bit count holds
ERRORS = {  # (key, reason) of every error row expected
    ("unsafe.tar#../evil.jpg", "unsafe_member"),
    ("unsafe.tar#/tmp/evil.jpg", "unsafe_member"),
    *((f"links.tar#cat/{n}.jpg", "not_a_file") for n in ("sym", "hard", "dev", "fifo")),
    ("huge.tar#cat/huge.jpg", "corrupt_archive"),  # declares 1 TiB
    ("cut.tar#cat/1.jpg", "corrupt_archive"),  # cut in its bytes
    ("cuthead.tar", "corrupt_archive"),  # cut in a header: the rest of the archive
    ("negative.tar#cat/2.jpg", "corrupt_archive"),  # a size leading back: looped for ever
    ("sparse.tar", "corrupt_archive"),  # a pax sparse map tarfile cannot parse
    ("garbage.tar", "corrupt_archive"),
    ("garbage.zip", "corrupt_archive"),
    ("dup.tar#cat/0.jpg", "duplicate_key"),
    ("names.tar#cat/caf\\xe9.jpg", "bad_member_name"),
    ("names.zip#cat/caf\\x82.jpg", "bad_member_name"),
    ("deep.tar#level1.tar#level2.tar#level3.tar", "nested_too_deep"),
    ("bomb.zip#cat/bomb.jpg", "corrupt_archive"),  # 4 MiB of zeros declared as 100 bytes
    ("big.zip#cat/big.jpg", "file_too_large"),  # 3 MiB, over --max_file_mb 1
    ("overlap.zip#cat/o1.jpg", "overlapping_member"),
    ("overlap.zip#cat/o2.jpg", "overlapping_member"),
    ("encrypted.zip#cat/e.jpg", "encrypted_member"),
}


def _tars(image) -> dict[str, tuple[bytes, dict[str, bytes]]]:
    """Each tar's bytes, and the images it holds that must become records by their keys'
    member names; `image()` gives a new JPEG each call."""
    good = {f"{label}/{n}.jpg": image() for label in ("cat", "dog") for n in range(3)}
    first = {"cat/0.jpg": image()}
    one = tar_member("cat/0.jpg", first["cat/0.jpg"])
    head = tar_bytes([one])[: tarfile.BLOCKSIZE * (2 + len(one[1]) // tarfile.BLOCKSIZE)]
    huge = tarfile.TarInfo("cat/huge.jpg")
    huge.size = 1 << 40
    loop = {f"cat/{n}.jpg": image() for n in range(3)}
    kept = {name: loop[name] for name in ("cat/0.jpg", "cat/1.jpg")}  # before the loop
    special = [
        tar_member("cat/sym.jpg", kind=tarfile.SYMTYPE, linkname="/etc/passwd"),
        tar_member("cat/hard.jpg", kind=tarfile.LNKTYPE, linkname="cat/0.jpg"),
        tar_member("cat/dev.jpg", kind=tarfile.CHRTYPE, devmajor=1, devminor=5),
        tar_member("cat/fifo.jpg", kind=tarfile.FIFOTYPE),
    ]
    sparse = tar_member("cat/s.jpg", image(), pax_headers={"GNU.sparse.map": "1,x"})
    return {
        "good.tar": (tar_bytes([tar_member(n, d) for n, d in good.items()]), good),
        "unsafe.tar": (
            tar_bytes([tar_member(n, image()) for n in ("../evil.jpg", "/tmp/evil.jpg")]),
            {},
        ),
        "links.tar": (tar_bytes(special), {}),
        "huge.tar": (head + tar_header(huge) + image(), first),
        "cut.tar": (tar_bytes([one, tar_member("cat/1.jpg", image())])[: len(head) + 900], first),
        "cuthead.tar": (
            tar_bytes([one, tar_member("cat/1.jpg", image())])[: len(head) + 200],
            first,
        ),
        "negative.tar": (looping_tar([tar_member(n, d) for n, d in loop.items()]), kept),
        "sparse.tar": (tar_bytes([one, sparse], tarfile.PAX_FORMAT), first),
        "garbage.tar": (bytes(range(256)) * 8, {}),
        "dup.tar": (tar_bytes([one, tar_member("cat/0.jpg", image())]), first),
        "names.tar": (tar_bytes([tar_member("cat/caf\udce9.jpg", image())]), {}),
        "deep.tar": (nested_tar(3, image()), {}),
    }


def _zips(image) -> dict[str, tuple[bytes, dict[str, bytes]]]:
    """As `_tars`, for the zips."""
    deflated = zipfile.ZIP_DEFLATED
    last, zero = {"cat/m.jpg": image()}, {"cat/o0.jpg": image()}
    pad = [(f"pad/{n}.dat", b"") for n in range(MANY)]  # not images: skipped files
    bomb = lying_size(zip_bytes([("cat/bomb.jpg", b"\0" * (4 << 20))], deflated), 100)
    return {
        "many.zip": (zip_bytes([*pad, *last.items()]), last),
        "garbage.zip": (bytes(range(256)) * 8, {}),
        "bomb.zip": (bomb, {}),
        "big.zip": (zip_bytes([("cat/big.jpg", b"\0" * (3 << 20))], deflated), {}),
        "overlap.zip": (
            overlapping(zip_bytes([(f"cat/o{n}.jpg", zero["cat/o0.jpg"]) for n in range(3)])),
            zero,
        ),
        "encrypted.zip": (encrypted(zip_bytes([("cat/e.jpg", image())])), {}),
        "names.zip": (zip_bytes([("cat/caf_.jpg", image())]).replace(b"caf_", b"caf\x82"), {}),
    }


def _forced_zip64(path: Path, images: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in images.items():
            with archive.open(name, "w", force_zip64=True) as member:
                member.write(data)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """The folder of archives, and the bytes of each record expected by its key."""
    rng, source = random.Random(5), photo("chelsea.png")

    def image() -> bytes:
        return encode(crop(source, rng, 48), quality=80)

    folder = tmp_path_factory.mktemp("hostile") / "archives"
    folder.mkdir()
    records = {}
    for name, (data, images) in {**_tars(image), **_zips(image)}.items():
        (folder / name).write_bytes(data)
        records.update({f"{name}#{member}": d for member, d in images.items()})
    z64 = {"cat/z0.jpg": image(), "dog/z1.jpg": image()}
    _forced_zip64(folder / "zip64.zip", z64)
    records.update({f"zip64.zip#{member}": d for member, d in z64.items()})
    return folder, records


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _convert(folder: Path, output: Path, *flags: str, cwd: Path):
    """The command run on `folder` from `cwd`; its completed process."""
    argv = ["convert", "--manifest", folder, "--output", output, "--no_progress", *flags]
    return command(*argv, "--max_file_mb", "1", timeout=TIMEOUT_S, cwd=cwd)


@pytest.fixture(scope="module")
def converted(hostile, tmp_path_factory) -> tuple[Path, Path, dict[str, bytes]]:
    """The folder converted on the local runner from an empty folder of its own (where a
    `../` member would land if one were ever written): the run's folder (holding the
    output and that folder), its version, and what the archives' folder held before."""
    folder, _ = hostile
    before = _files(folder.parent)
    run = tmp_path_factory.mktemp("local")
    (run / "cwd").mkdir()
    ran = _convert(folder, run / "out", "--max_error_rate", "1", cwd=run / "cwd")
    assert ran.returncode == 0, ran.stderr
    return run, published(run / "out"), before


def _records(version: Path) -> dict[str, bytes]:
    import tensorflow as tf

    info = json.loads((version / INFO_FILE).read_text())
    files = [str(version / s["file"]) for split in info["splits"].values() for s in split["shards"]]
    spec = {k: tf.io.FixedLenFeature([], tf.string) for k in ("image/source_id", "image/encoded")}
    parsed = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(files)]
    return {e["image/source_id"].numpy().decode(): e["image/encoded"].numpy() for e in parsed}


def test_every_hostile_member_is_an_error_row_and_every_good_image_a_record(hostile, converted):
    folder, records = hostile
    run, version, before = converted
    errors = Counter((e["key"], e["reason"]) for e in error_rows(version))
    assert errors == Counter(ERRORS)
    assert _records(version) == records  # passed through: each record holds its member's bytes
    info = json.loads((version / INFO_FILE).read_text())
    assert info["rows_in"] == info["records"] + info["errors"] == len(records) + len(ERRORS)
    assert info["skipped_files"] == MANY


def test_nothing_is_written_outside_the_output_folder(hostile, converted):
    folder, _ = hostile
    run, _, before = converted
    assert _files(folder.parent) == before
    assert sorted(p.name for p in run.iterdir()) == ["cwd", "out"]
    assert not any((run / "cwd").iterdir())


def test_over_the_default_error_rate_the_version_is_not_published(hostile, tmp_path):
    folder, _ = hostile
    ran = _convert(folder, tmp_path / "out", cwd=tmp_path)
    assert ran.returncode == 1, ran.stderr
    assert "version not published" in ran.stderr and "Traceback" not in ran.stderr


def test_the_direct_runner_writes_the_same_shards(hostile, converted, tmp_path):
    folder, _ = hostile
    _, local, _ = converted
    ran = _convert(folder, tmp_path / "out", "--max_error_rate", "1", *BEAM, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    beam = published(tmp_path / "out")
    info = json.loads((local / INFO_FILE).read_text())
    shards = [s["file"] for split in info["splits"].values() for s in split["shards"]]
    assert shards
    for shard in shards:
        assert (beam / shard).read_bytes() == (local / shard).read_bytes(), shard
    assert sorted(map(str, error_rows(beam))) == sorted(map(str, error_rows(local)))
