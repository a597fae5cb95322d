"""gs:// end to end against a real GCS JSON API (gcp-storage-emulator on loopback)."""

import json
import os
import subprocess
import sys

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to
from conftest import PHOTOS, error_rows, make_images, write_manifest
from tls_proxy import TlsProxy

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.commit import read_info
from tfrecord_pipeline.dataset.metadata import INFO_FILE
from tfrecord_pipeline.dataset.publish import (
    SupersededError,
    publish,
    published_since,
    read_pointer,
    start,
)
from tfrecord_pipeline.dataset.versions import (
    MARKER,
    POINTER,
    PUBLISHED,
    STAGING,
    VERSIONS,
    Pointer,
    resolve,
)
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.beam.manifests import ReadManifests
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig
from tfrecord_pipeline.transforms.manifest.sources import check_manifests, read_all
from tfrecord_pipeline.transforms.storage import file_checks, fileio

pytestmark = pytest.mark.slow


def _files(root: str) -> dict[str, bytes]:
    prefix = root.rstrip("/") + "/"
    return {p[len(prefix) :]: fileio.read_bytes(p) for p in fileio.glob(prefix + "**")}


# Reads each dataset root's published version with tf.data (LATEST names it, and the hash of
# its tfrecord_pipeline.json) and prints, per record, what a training input pipeline would see,
# after the root. Run in a subprocess: TensorFlow's GCS client reads its proxy and CA settings
# from the environment. Every root in one process: TensorFlow is imported once.
READ_WITH_TF = """
import hashlib, json, sys
import tensorflow as tf
from tfrecord_pipeline import load
dtypes = {"int64": tf.int64, "string": tf.string, "float32": tf.float32}
for root in sys.argv[1:]:
    pointer = json.loads(tf.io.gfile.GFile(root + "/LATEST").read())
    version = root + "/versions/" + pointer["version"]
    info_bytes = tf.io.gfile.GFile(version + "/tfrecord_pipeline.json", "rb").read()
    assert hashlib.sha256(info_bytes).hexdigest() == pointer["sha256"]
    assert tf.io.gfile.exists(version + "/_COMMITTED")
    info = json.loads(info_bytes)
    spec = {k: tf.io.FixedLenFeature([], dtypes[t]) for k, t in info["features"].items()}
    for name, split in sorted(info["splits"].items()):
        files = [version + "/" + shard["file"] for shard in split["shards"]]
        for record in tf.data.TFRecordDataset(files):
            example = tf.io.parse_single_example(record, spec)
            pixels = tf.io.decode_jpeg(example["image/encoded"]).numpy()
            print(json.dumps([root, name, example["image/source_id"].numpy().decode(),
                              int(example["image/class/label"]), list(pixels.shape),
                              hashlib.sha256(pixels.tobytes()).hexdigest()]))
    # The loader, driven by the same metadata, finds them all.
    for name, split in sorted(info["splits"].items()):
        loaded = load(root, name, batch_size=None, image_size=None, shuffle_buffer=0)
        assert sum(1 for _ in loaded) == split["examples"], name
"""


def _read_with_tensorflow(roots: list[str], env: dict) -> dict[str, list]:
    """What READ_WITH_TF printed for each root."""
    done = subprocess.run(
        [sys.executable, "-c", READ_WITH_TF, *roots],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    read = {root: [] for root in roots}
    for line in done.stdout.splitlines():
        root, *record = json.loads(line)
        read[root].append(record)
    return read


def _but_errors_files(info: bytes) -> dict:
    """A version's metadata without its errors files' sizes and CRC-32C."""
    fields = json.loads(info)
    fields["error_files"] = [(f["file"], f["rows"]) for f in fields["error_files"]]
    return fields


def test_bucket_to_bucket_gives_the_bytes_of_a_local_run(tmp_path, gcs, convert):
    rows = make_images(tmp_path, per_class=3)
    rows.append({"image_uri": "images/not-there.jpg", "label": "coffee"})
    manifest = write_manifest(tmp_path / "manifest.csv", rows)
    flags = ("--num_shards", "2", "--split", "train=0.5,validation=0.5", "--max_error_rate", "1")
    # Shards of about 20 KB over a 10 KB target: Beam writes them in pieces that the bucket
    # composes (the local runner writes them whole).
    flags += ("--target_shard_mb", "0.01")
    local, local_info = convert(manifest, *flags, output=tmp_path / "local")
    source = gcs(tmp_path, "in")
    remote = f"gs://tfrp-test/{tmp_path.name}"  # one output per test run (and runner)
    _, remote_info = convert(f"{source}/manifest.csv", *flags, output=remote)

    assert remote_info.records == local_info.records == 12
    assert remote_info.errors_by_reason == {"missing_file": 1}  # NotFound, not a dead worker
    version = resolve(remote).folder
    version_name = version.rsplit("/", 1)[1]
    remote_files = _files(version)
    local_files = {
        p.relative_to(local).as_posix(): p.read_bytes() for p in local.rglob("*") if p.is_file()
    }
    assert sorted(remote_files) == sorted(local_files)
    for name, data in local_files.items():
        # The error rows name the manifest they came from, and the rows files fingerprint each
        # image's identity: a file's modification time here, an object's update time there. So
        # the metadata differs only in its errors files' sizes and CRC-32C, and the marker
        # holding its digest with it.
        if name == INFO_FILE:
            assert _but_errors_files(remote_files[name]) == _but_errors_files(data)
        elif name != MARKER and not name.startswith(("errors/", "rows/")):
            assert remote_files[name] == data, name
    # The root holds the pointer, the one version and its record; no staging objects.
    assert {name.split("/")[0] for name in _files(remote)} == {POINTER, VERSIONS, PUBLISHED}
    assert MARKER in remote_files and not fileio.glob(f"{remote}/{STAGING}/**")
    assert json.loads(_files(remote)[POINTER])["version"] == version_name
    assert verify(remote, "all") == verify(version, "all") == (12, [])
    # The recorded checksums are the bucket's own: a shard can be checked from its metadata.
    shards = [shard for split in read_info(version).splits.values() for shard in split.shards]
    assert shards and all(
        gcs.bucket.get_blob(f"{tmp_path.name}/{VERSIONS}/{version_name}/{shard.file}").crc32c
        == shard.crc32c
        for shard in shards
    )

    # TensorFlow's own gs:// filesystem, through a loopback TLS proxy to the emulator.
    with TlsProxy(tmp_path, gcs.port) as proxy:
        via_proxy = {
            "HTTPS_PROXY": f"http://127.0.0.1:{proxy.port}",
            "CURL_CA_BUNDLE": str(proxy.ca_bundle),
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator",
        }
        read = _read_with_tensorflow([remote, str(tmp_path / "local")], via_proxy)
    from_bucket, from_folder = read.values()
    assert len(from_bucket) == 12 and from_bucket == from_folder


def test_local_manifest_with_gs_images_and_a_gs_class_tree(tmp_path, gcs, convert):
    make_images(tmp_path / "tree", per_class=2)
    images = gcs(tmp_path / "tree" / "images", "tree")
    rows = [{"image_uri": f"{images}/coffee/{i}.jpg", "label": "coffee"} for i in range(2)]
    output, info = convert(write_manifest(tmp_path / "m.jsonl", rows))
    assert info.records == 2 and (output / MARKER).exists()
    tree, tree_info = convert(images + "/", output=tmp_path / "from-tree")
    assert tree_info.records == 8
    assert (tree / "labels.txt").read_text().split() == ["astronaut", "chelsea", "coffee", "rocket"]


def test_an_object_over_the_size_limit_is_an_error_row(tmp_path, gcs, convert):
    rows = make_images(tmp_path / "src", per_class=1)
    (tmp_path / "src/images/big.jpg").write_bytes((PHOTOS / "retina.jpg").read_bytes())
    rows.append({"image_uri": "images/big.jpg", "label": "coffee"})
    write_manifest(tmp_path / "src/m.csv", rows)
    source = gcs(tmp_path / "src", "limit")
    flags = ("--max_file_mb", "0.1", "--dedup", "--max_error_rate", "1")
    output, info = convert(f"{source}/m.csv", *flags, output=tmp_path / "out")
    (error,) = error_rows(output)
    # The size is the object's metadata (a read to the limit could only say "larger")
    assert (error["reason"], error["message"]) == (
        "file_too_large",
        f"{source}/images/big.jpg: 269,564 bytes, over the limit of 104,857 bytes (--max_file_mb)",
    )
    assert info.records == 4


def test_a_manifest_the_store_keeps_failing_is_a_fault_not_a_mistake(
    tmp_path, gcs, faulty_gcs, monkeypatch, capsys
):
    """A manifest Cloud Storage will not serve (a 503 on every attempt) is exit status 3, a
    fault to rerun; a manifest it does not have is a mistake, status 2."""
    write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    source = gcs(tmp_path, "unavailable")
    faulty_gcs("unavailable/", always={"unavailable/m.csv": "503"})
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where the log file goes
    argv = ["convert", "--output", str(tmp_path / "out"), "--no_progress", "--manifest"]
    # A pattern: the manifest is found by a listing, which the proxy lets through.
    assert main([*argv, f"{source}/m*.csv"]) == 3
    assert "Cloud Storage kept failing a request for gs://tfrp-test/unavailable/m.csv (503 " in (
        capsys.readouterr().err
    )
    assert main([*argv, f"{source}/none.csv"]) == 2


def test_a_refresh_on_the_bucket_carries_shards_by_server_side_copy(
    tmp_path, gcs, capfd, monkeypatch
):
    rows = make_images(tmp_path, per_class=3)
    write_manifest(tmp_path / "older.csv", rows[:-2])
    write_manifest(tmp_path / "manifest.csv", rows)
    source = gcs(tmp_path, f"{tmp_path.name}-in")
    root = f"gs://tfrp-test/{tmp_path.name}-nightly"
    argv = ["--output", root, "--no_progress", "--num_shards", "2"]
    first = run(["--manifest", f"{source}/older.csv", *argv])
    second = run(["--manifest", f"{source}/manifest.csv", *argv, "--incremental"])
    assert "converting every row" not in capfd.readouterr().err
    assert second.info.records == len(rows) and verify(root, "all") == (len(rows), [])
    old = [shard.crc32c for shard in first.info.splits["train"].shards]
    new = [shard.crc32c for shard in second.info.splits["train"].shards]
    assert new[: len(old)] == old and len(new) == len(old) + 1  # carried whole, one new shard
    assert verify(first.folder, "all") == (len(rows) - 2, [])
    # A published object damaged: its own CRC-32C (listed, never downloaded) keeps it out.
    damaged = f"{second.folder}/{second.info.splits['train'].shards[0].file}"
    data = bytearray(fileio.read_bytes(damaged))
    data[100] ^= 1
    fileio.write_bytes(damaged, bytes(data))
    monkeypatch.setattr(file_checks, "stored_checksum", _never_read)
    third = run(["--manifest", f"{source}/manifest.csv", *argv, "--incremental"])
    assert third.info.refresh["damaged"] == [damaged.rsplit("/", 1)[1]]
    assert verify(root, "all") == (len(rows), [])


def _never_read(path):
    raise AssertionError(f"{path} was read to be checked")


def test_a_gs_tree_is_listed_folder_by_folder_as_a_local_walk_lists_it(tmp_path, gcs, faulty_gcs):
    """The same tree, local and on the bucket: the same rows, errors and skipped files (a
    folder below <split>/<label>/ is skipped whole, as the local walk skips it); the launcher's
    check of the bucket's tree lists its top folder (whether it is a folder of archives) and
    one object, not the tree."""
    tree = tmp_path / "tree"
    for relative in (
        "cat/1.jpg",
        "dog/2.png",
        "train/cat/3.jpg",
        "train/cat/deep/4.jpg",
        "notes.txt",
        "cat/readme.md",
    ):
        (tree / relative).parent.mkdir(parents=True, exist_ok=True)
        (tree / relative).write_bytes(b"x")
    root = gcs(tree, f"{tmp_path.name}-tree")
    proxy = faulty_gcs(f"{tmp_path.name}-tree/")  # no faults: it counts the requests
    (manifest,) = check_manifests([f"{root}/"], ReadConfig())
    listings = [target for (_, target) in proxy._sent if "/o?" in target]
    top, check = listings
    assert "delimiter=%2F" in top and "maxResults=1" in check and manifest.kind == "tree"

    def seen(items, base):
        return sorted(
            (
                type(item).__name__,
                str(getattr(item, "key", getattr(item, "path", ""))).replace(base, "<root>"),
            )
            for item in items
        )

    remote = seen(read_all(manifest, ReadConfig()), root)
    local = seen(read_all(check_manifests([str(tree)], ReadConfig())[0], ReadConfig()), str(tree))
    assert (
        remote
        == local
        == [
            ("ManifestRow", "cat/1.jpg"),
            ("ManifestRow", "dog/2.png"),
            ("ManifestRow", "train/cat/3.jpg"),
            ("SkippedFile", "<root>/cat/readme.md"),
            ("SkippedFile", "<root>/notes.txt"),
            ("SkippedFile", "<root>/train/cat/deep"),
        ]
    )
    with BeamTestPipeline() as p:
        read = p | ReadManifests([manifest], ReadConfig())
        keys = read["rows"] | beam.FlatMap(lambda batch: [row.key for row in batch.rows])
        assert_that(keys, equal_to(["cat/1.jpg", "dog/2.png", "train/cat/3.jpg"]))
        skipped = read["skipped"] | beam.Map(lambda item: item.path.replace(root, "<root>"))
        assert_that(
            skipped,
            equal_to([item for kind, item in local if kind == "SkippedFile"]),
            label="Skipped",
        )


def test_a_gs_manifest_read_in_ranged_pieces_gives_the_rows_of_one_read(tmp_path, gcs):
    lines = (
        ["image_uri,label"]
        + [f"images/{i:04d}.jpg,{'cat' if i % 3 else 'dog'}" for i in range(300)]
        + ["broken.jpg"]
    )
    (tmp_path / "m.csv").write_text("\n".join(lines) + "\n")
    source = gcs(tmp_path, f"{tmp_path.name}-pieces")
    (manifest,) = check_manifests([f"{source}/m.csv"], ReadConfig())
    whole = list(read_all(manifest, ReadConfig()))
    assert len(whole) == 301 and whole[-1].source == f"{source}/m.csv@{manifest.size - 11}"
    with BeamTestPipeline() as p:
        read = p | ReadManifests([manifest], ReadConfig(), piece_bytes=200)
        rows = read["rows"] | beam.FlatMap(lambda batch: batch.rows)
        assert_that((rows, read["errors"]) | beam.Flatten(), equal_to(whole))


def test_of_two_runs_from_one_version_in_a_bucket_the_second_to_publish_is_superseded(
    tmp_path, gcs, faulty_gcs
):
    """LATEST's write carries the generation the run started from: of two runs started from
    one version, the first publishes, a retry of its write is a no-op, and the second is
    refused whatever it wrote. (The proxy answers preconditions as Cloud Storage does.)"""
    faulty_gcs(f"{tmp_path.name}/")
    root = f"gs://tfrp-test/{tmp_path.name}"
    for _ in range(2):  # from no version (generation 0), then from the version just published
        one, other = start(root), start(root)
        for target in (one, other):  # complete, as a run's commit leaves its version
            fileio.write_bytes(fileio.join(target.folder, MARKER), b"{}")
        first = Pointer(one.version, "1" * 64)
        publish(one, first)
        publish(one, first)
        assert published_since(one) is None and published_since(other) == first
        with pytest.raises(SupersededError, match=f"another run published {first.version} in "):
            publish(other, Pointer(other.version, "2" * 64))
        assert read_pointer(root)[0] == first
    assert gcs.bucket.get_blob(f"{tmp_path.name}/{POINTER}").content_type == "application/json"
