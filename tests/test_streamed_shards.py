"""A published shard's records read as a stream (ShardFormat.records_at over
transforms/tfrecord/records.py's `records_in`): a record at a time from a local file or an
object, gunzipped as it streams, checked as a whole file's are, and never the file in memory,
as a refresh rewrites a shard that lost records (transforms/write/carried.py)."""

import gzip
import hashlib
import io
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import encode, make_images, photo, traced_peak, write_manifest

from tfrecord_pipeline.dataset.versions import resolve
from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.storage import gcs as store
from tfrecord_pipeline.transforms.tfrecord.records import RecordError, frame, records_in
from tfrecord_pipeline.transforms.write.formats import ShardFormat

RECORD_BYTES = 64 << 10


def _records(count: int, seed: int = 3) -> list[bytes]:
    """Records of RECORD_BYTES that gzip cannot shrink to nothing (so a gzip shard is large)."""
    rng = random.Random(seed)
    return [rng.randbytes(RECORD_BYTES // 2) * 2 for _ in range(count)]


def _shard_bytes(records: list[bytes], compression: str) -> bytes:
    """A shard file of `records`; gzip as several members, as a joined shard can be."""
    payload = b"".join(frame(record) for record in records)
    if compression != "gzip":
        return payload
    third = len(payload) // 3
    pieces = (payload[:third], payload[third : 2 * third], payload[2 * third :])
    return b"".join(gzip.compress(piece, mtime=0) for piece in pieces)


def _offsets(records: list[bytes]) -> list[int]:
    ends = [0]
    for record in records:
        ends.append(ends[-1] + len(record) + 16)
    return ends[:-1]


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_a_shard_streamed_in_small_reads_gives_every_record_and_its_offset(compression):
    records = [b"", b"a", *_records(5)]
    data = _shard_bytes(records, compression)
    # 7 bytes a read: headers, records and gzip members all fall across reads.
    stream = io.BufferedReader(io.BytesIO(data), buffer_size=7)
    expected = list(zip(_offsets(records), records, strict=True))
    assert list(records_in(stream, compression)) == expected


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_a_damaged_record_in_the_middle_of_a_shard_file_is_a_record_error(tmp_path, compression):
    """The records before it come out; the one damaged is RecordError saying which, never
    records read past it."""
    records = _records(40)
    payload = bytearray(_shard_bytes(records, "none"))
    damaged = 20
    payload[_offsets(records)[damaged] + 12 + 100] ^= 1  # a byte of the record's data
    path = tmp_path / "shard"
    data = gzip.compress(bytes(payload), mtime=0) if compression == "gzip" else bytes(payload)
    path.write_bytes(data)
    read, shard = [], ShardFormat(compression=compression).records_at(str(path))
    match = f"^record {damaged} at byte {_offsets(records)[damaged]}: data CRC mismatch$"
    with pytest.raises(RecordError, match=match):
        read.extend(record for _, record in shard)
    assert read == records[:damaged]


_READ_SETUP = """
import hashlib
from tfrecord_pipeline.transforms.storage import retry
from tfrecord_pipeline.transforms.write.formats import ShardFormat
retry.FIRST_DELAY_S = 0.001
retry.is_transient(OSError())  # a fault's modules imported first: memory of code, not of bytes
digest = hashlib.sha256()
"""
_READ = """
for _, record in ShardFormat(compression=sys.argv[2]).records_at(sys.argv[1]):
    digest.update(record)
print(digest.hexdigest())
"""


def _peak_of_reading(path: str, compression: str) -> tuple[str, int]:
    """The SHA-256 of every record of the shard at `path`, one after another, and the most
    memory Python held meanwhile (conftest.traced_peak)."""
    (digest,), peak = traced_peak(_READ_SETUP, _READ, path, compression)
    return digest, peak


def _digest(records: list[bytes]) -> str:
    return hashlib.sha256(b"".join(records)).hexdigest()


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_a_local_shard_is_read_in_memory_of_its_buffers_never_the_file(tmp_path, compression):
    records = _records(400)  # 25 MB of records; gzip stores about half of it
    path = tmp_path / "shard"
    path.write_bytes(_shard_bytes(records, compression))
    digest, peak = _peak_of_reading(str(path), compression)
    assert digest == _digest(records)
    assert peak < 8 << 20 < len(records) * RECORD_BYTES // 3  # buffers of 1 MB, and a record


def test_an_object_cut_mid_shard_is_read_on_from_the_cut_in_memory_of_its_buffers(
    tmp_path, gcs, faulty_gcs
):
    """A shard on Cloud Storage streamed through 503s, drops and bodies cut midway (the
    first answer of its media among them): the ranged reads go on where a cut stopped them,
    and the records are the file's, every one, never the whole object held."""
    records = _records(200)  # 13 MB
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "train.tfrecord").write_bytes(_shard_bytes(records, "none"))
    prefix = f"streamed-{tmp_path.name}"
    path = f"{gcs(tmp_path / 'up', prefix)}/train.tfrecord"
    proxy = faulty_gcs(f"{prefix}/", rate=0.5, seed=2)
    digest, peak = _peak_of_reading(path, "none")
    assert digest == _digest(records)
    assert proxy.faults["truncate"] and proxy.failed[f"{prefix}/train.tfrecord"]
    assert peak < 6 << 20 < store.stat(path).size // 2


def _version_objects(root: str) -> dict[str, bytes]:
    """Every object of the version published at `root`, by its name inside it."""
    folder = resolve(root).folder
    return {name[len(folder) :]: fileio.read_bytes(name) for name in fileio.glob(f"{folder}/**")}


@pytest.mark.slow
def test_a_refresh_on_cloud_storage_rewrites_shards_through_faults_into_a_clean_runs_bytes(
    tmp_path, gcs, faulty_gcs
):
    """Two versions alike in the bucket, each refreshed by a manifest that lost a row of
    each shard: the one whose reads meet 503s, drops and cut bodies (its shards streamed
    through them as they are rewritten) publishes the bytes the other does."""
    rows = make_images(tmp_path, per_class=5)
    every = write_manifest(tmp_path / "every.csv", rows)
    kept = [row for index, row in enumerate(rows) if index % 7]
    fewer = write_manifest(tmp_path / "fewer.csv", kept)
    prefix = f"rewrite-{tmp_path.name}"
    roots = [f"gs://tfrp-test/{prefix}/{name}" for name in ("clean", "faulty")]
    flags = ["--no_progress", "--num_shards", "2", "--processes", "1"]
    for root in roots:
        run(["--manifest", str(every), "--output", root, *flags])
    clean = run(["--manifest", str(fewer), "--output", roots[0], *flags, "--incremental"])
    proxy = faulty_gcs(f"{prefix}/faulty/", rate=0.5, seed=3)
    faulty = run(["--manifest", str(fewer), "--output", roots[1], *flags, "--incremental"])
    assert faulty.info.refresh == clean.info.refresh
    assert clean.info.refresh["rewritten"] == len(kept)  # no shard copied whole
    assert _version_objects(roots[1]) == _version_objects(roots[0])
    assert proxy.faults["truncate"]


def _big_images(root: Path, count: int) -> list[dict]:
    """`count` JPEGs of about 1.5 MB each, of a photo in the repository, each its own."""
    big = photo().resize((1400, 1400))
    (root / "images").mkdir(parents=True)
    rows = []
    for index in range(count):
        name = f"images/{index}.jpg"
        (root / name).write_bytes(encode(big, quality=100, subsampling=0, comment=str(index)))
        rows.append({"image_uri": name, "label": "big"})
    return rows


def _refresh_peak_rss_mb(manifest: Path, root: Path) -> float:
    """The peak RSS of the largest process of a refresh by `manifest` (resource's maximum
    over the children a wrapper process waited for: the run and the workers it started)."""
    refresh = [sys.executable, "-m", "tfrecord_pipeline.cli.main", "convert", "--no_progress"]
    refresh += ["--manifest", str(manifest), "--output", str(root), "--incremental"]
    wrapper = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *refresh], capture_output=True, text=True, check=True
    )
    return int(done.stdout.split()[-1]) / 1024


@pytest.mark.slow
def test_a_refresh_rewrites_a_published_shard_in_memory_far_below_its_size(tmp_path):
    """A published shard of ~60 MB that lost a record is rewritten from the old file: the
    refresh's peak RSS is within a fraction of the shard's size of a refresh that copies it
    whole (no byte of it through the process). Holding the shard would add its size."""
    rows = _big_images(tmp_path, 40)
    root = tmp_path / "nightly"
    first = subprocess.run(
        [sys.executable, "-m", "tfrecord_pipeline.cli.main", "convert", "--no_progress"]
        + ["--manifest", str(write_manifest(tmp_path / "all.csv", rows)), "--output", str(root)],
        capture_output=True,
        check=True,
    )
    assert first.returncode == 0
    (shard,) = (Path(resolve(str(root)).folder)).glob("train-*")
    size_mb = shard.stat().st_size / 2**20
    assert size_mb > 50
    carried = _refresh_peak_rss_mb(tmp_path / "all.csv", root)  # the shard copied whole
    rewritten = _refresh_peak_rss_mb(write_manifest(tmp_path / "less.csv", rows[1:]), root)
    (rewritten_shard,) = Path(resolve(str(root)).folder).glob("train-*")
    assert sum(1 for _ in ShardFormat().records_at(str(rewritten_shard))) == len(rows) - 1
    assert rewritten - carried < size_mb / 4, (carried, rewritten, size_mb)
