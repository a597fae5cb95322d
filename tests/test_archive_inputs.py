"""Archives as inputs, end to end: tar and zip files, nested tars and WebDataset samples
(transforms/manifest/archives.py), members named in a CSV (transforms/archive/locate.py), and
a refresh that knows members again by their own identity."""

import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import RUNNERS, make_images, read_manifest, write_manifest

from tfrecord_pipeline.dataset.versions import resolve
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, RowError
from tfrecord_pipeline.transforms.image.files import read_image
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, SkippedFile


def _records(folder: str) -> list[tuple[str, int, bytes]]:
    """(key, label id, image bytes) of every record, read with TensorFlow, in file order."""
    import tensorflow as tf

    spec = {
        "image/source_id": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
    }
    found = []
    for record in tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(f"{folder}/train-*"))):
        example = tf.io.parse_single_example(record, spec)
        found.append(
            (
                example["image/source_id"].numpy().decode(),
                int(example["image/class/label"]),
                example["image/encoded"].numpy(),
            )
        )
    return found


def _convert(manifest, output: Path, *flags: str):
    argv = ["--manifest", str(manifest), "--output", str(output), "--no_progress"]
    return run([*argv, "--num_shards", "3", *flags])


@pytest.fixture
def tree(tmp_path) -> Path:
    """A class-folder tree, `pets/<label>/<n>.jpg`, of 20 images."""
    make_images(tmp_path, per_class=5)
    (tmp_path / "images").rename(tmp_path / "pets")
    return tmp_path / "pets"


def _tar(path: Path, root: Path, arcname: str) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as archive:
        archive.add(root, arcname=arcname)
    return path


def _zip(path: Path, root: Path, arcname: str) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(root.rglob("*.jpg")):
            archive.write(file, f"{arcname}/{file.relative_to(root)}")
    return path


def test_a_tar_and_a_zip_give_the_records_of_their_folder(tmp_path, tree):
    """Members keep their folder's labels (a top folder named as the archive is not one), and
    their bytes: the same images, labels and ids as the loose tree, on both runners, whose
    shards are the same bytes."""
    loose = {(label, image) for _, label, image in _records(_convert(tree, tmp_path / "a").folder)}
    for archive in (_tar(tmp_path / "p.tar", tree, "p"), _zip(tmp_path / "p.zip", tree, "p")):
        shards = {}
        for runner, flags in RUNNERS.items():
            result = _convert(archive, tmp_path / f"{archive.name}-{runner}", *flags)
            assert not result.info.failures and result.info.errors_by_reason == {}
            records = _records(result.folder)
            assert {(label, image) for _, label, image in records} == loose
            assert {key.split("#")[0] for key, _, _ in records} == {archive.name}
            shards[runner] = {p.name: p.read_bytes() for p in Path(result.folder).glob("train-*")}
        assert shards["local"] == shards["beam"]


def test_a_tar_of_tars_labels_each_image_by_its_inner_tar(tmp_path, tree):
    """ImageNet's train layout: one tar a class, named by its synset, in one tar."""
    inner = [_tar(tmp_path / f"{label.name}.tar", label, ".") for label in sorted(tree.iterdir())]
    outer = tmp_path / "train.tar"
    with tarfile.open(outer, "w") as archive:
        for path in inner:
            archive.add(path, arcname=path.name)
    items = read_manifest(outer)
    rows = [item for item in items if isinstance(item, ManifestRow)]
    assert len(rows) == 20 and not [item for item in items if isinstance(item, ErrorRow)]
    assert {row.label for row in rows} == {path.stem for path in inner}
    some = rows[0]
    assert some.image_uri.startswith(f"{outer}#") and ".tar#" in some.image_uri
    with open(outer, "rb") as whole:  # a nested member is a byte range of the outer tar
        whole.seek(some.member.offset)
        inner_name = some.image_uri.split("#")[1]
        with tarfile.open(tmp_path / inner_name) as archive:
            member = archive.getmember(some.image_uri.split("#")[2])
            assert whole.read(some.member.stored) == archive.extractfile(member).read()


def _webdataset(path: Path, samples: list[tuple[bytes, int, str]]) -> Path:
    """A WebDataset shard as webdataset.TarWriter lays one out: each sample's members
    together, `<key>.<suffix>`."""
    with tarfile.open(path, "w") as archive:
        for number, (image, label, caption) in enumerate(samples):
            key = f"{path.stem}_{number:06d}"
            members = {"jpg": image, "cls": str(label).encode(), "json": caption.encode()}
            for suffix, data in members.items():
                info = tarfile.TarInfo(f"{key}.{suffix}")
                info.size, info.mtime = len(data), 1_700_000_000
                archive.addfile(info, io.BytesIO(data))
    return path


def test_webdataset_shards_in_a_folder_are_samples_labelled_by_their_cls(tmp_path, tree):
    images = [path.read_bytes() for path in sorted(tree.rglob("*.jpg"))]
    shards = tmp_path / "shards"
    shards.mkdir()
    for shard in range(2):
        samples = [
            (image, index % 3, f'{{"width": {index}}}')
            for index, image in enumerate(images[shard::2])
        ]
        _webdataset(shards / f"{shard:06d}.tar", samples)
    result = _convert(shards, tmp_path / "out", "--feature", "width:int64")
    assert not result.info.failures and result.info.errors_by_reason == {}
    records = _records(result.folder)
    assert sorted(image for _, _, image in records) == sorted(images)
    assert {label for _, label, _ in records} == {0, 1, 2}  # integer ids kept as they are
    assert {key.split("#")[0] for key, _, _ in records} == {"000000.tar", "000001.tar"}


def test_a_csv_mixes_loose_files_and_members_of_archives(tmp_path, tree):
    inner = _tar(tmp_path / "cat.tar", tree / "chelsea", ".")
    outer = tmp_path / "outer.tar"
    with tarfile.open(outer, "w") as archive:
        archive.add(inner, arcname="cat.tar")
    zipped = _zip(tmp_path / "more.zip", tree / "coffee", "coffee")
    loose = sorted((tree / "rocket").glob("*.jpg"))[0]
    rows = [
        {"image_uri": str(loose), "label": "rocket"},
        {"image_uri": f"{outer}#cat.tar#./0.jpg", "label": "cat"},
        {"image_uri": f"{zipped}#coffee/1.jpg", "label": "coffee"},
        {"image_uri": f"{zipped}#coffee/none.jpg", "label": "coffee"},
        {"image_uri": f"{tmp_path}/gone.tar#x.jpg", "label": "coffee"},
    ]
    result = _convert(write_manifest(tmp_path / "m.csv", rows), tmp_path / "out")
    assert result.info.errors_by_reason == {"missing_file": 2}
    records = {key: image for key, _, image in _records(result.folder)}
    assert records[str(loose)] == loose.read_bytes()
    assert records[f"{outer}#cat.tar#./0.jpg"] == (tree / "chelsea" / "0.jpg").read_bytes()
    assert records[f"{zipped}#coffee/1.jpg"] == (tree / "coffee" / "1.jpg").read_bytes()


def test_a_loose_file_with_a_hash_in_its_name_is_still_a_file(tmp_path, tree):
    odd = tmp_path / "odd.tar#1.jpg"
    odd.write_bytes((tree / "coffee" / "0.jpg").read_bytes())
    rows = [{"image_uri": str(odd), "label": "coffee"}]
    result = _convert(write_manifest(tmp_path / "m.csv", rows), tmp_path / "out")
    assert result.info.errors_by_reason == {} and len(_records(result.folder)) == 1


def test_files_and_folders_in_an_archive_that_are_not_class_images_are_skipped(tmp_path, tree):
    (tree / "README.txt").write_text("about")
    (tree / "deep" / "a" / "b").mkdir(parents=True)
    (tree / "deep" / "a" / "b" / "x.jpg").write_bytes(b"deep")
    items = read_manifest(_tar(tmp_path / "pets.tar", tree, "pets"))
    skipped = sorted(item.path.split("#")[1] for item in items if isinstance(item, SkippedFile))
    assert skipped == ["pets/README.txt", "pets/deep/a/b/x.jpg"]
    assert sum(isinstance(item, ManifestRow) for item in items) == 20


def test_a_refresh_converts_only_the_members_that_changed(tmp_path, tree):
    """A rewritten tar (a new time on the file) keeps its unchanged members: known by their
    own header's size and time, they are carried; a changed or new member is converted."""
    archive = _tar(tmp_path / "pets.tar", tree, "pets")
    root = tmp_path / "nightly"
    _convert(archive, root)
    changed = tree / "coffee" / "2.jpg"
    changed.write_bytes((tree / "rocket" / "0.jpg").read_bytes())
    os.utime(changed, (2_000_000_000, 2_000_000_000))
    (tree / "coffee" / "9.jpg").write_bytes((tree / "rocket" / "1.jpg").read_bytes())
    _tar(archive, tree, "pets")
    refreshed = _convert(archive, root, "--incremental")
    assert refreshed.info.refresh["converted"] == 2
    assert refreshed.info.refresh["carried"] + refreshed.info.refresh["rewritten"] == 19
    assert verify(str(root), "all") == (21, [])
    assert resolve(str(root)).folder == refreshed.folder
    full = _convert(archive, tmp_path / "full")
    assert sorted(_records(refreshed.folder)) == sorted(_records(full.folder))


def test_a_member_of_an_archive_rewritten_since_its_listing_is_not_read(tmp_path, tree):
    """Its offsets may now hold another member: never another image under this key."""
    archive = _tar(tmp_path / "pets.tar", tree, "pets")
    row = next(item for item in read_manifest(archive) if isinstance(item, ManifestRow))
    member_path = tree.parent / row.key.split("#")[1]
    assert read_image(row.image_uri, 1 << 30, row.member)[0] == member_path.read_bytes()
    os.utime(archive, (2_000_000_000, 2_000_000_000))
    with pytest.raises(RowError) as error:
        read_image(row.image_uri, 1 << 30, row.member)
    assert error.value.reason == Reason.CHANGED_ARCHIVE


def test_archives_kept_in_order_are_shards_of_runs_alike_on_both_runners(tmp_path, tree):
    """`--archive_order keep`: each shard holds runs of its archives' members in the order the
    archives hold them, the archives laid end to end; the same bytes on both runners."""
    images = [path.read_bytes() for path in sorted(tree.rglob("*.jpg"))]
    shards = tmp_path / "shards"
    shards.mkdir()
    for shard in range(4):
        samples = [(image, index % 3, "{}") for index, image in enumerate(images[shard::4])]
        _webdataset(shards / f"{shard:06d}.tar", samples)
    written = {}
    for runner, flags in RUNNERS.items():
        result = _convert(shards, tmp_path / runner, "--archive_order", "keep", *flags)
        assert result.info.errors_by_reason == {}
        files = sorted(Path(result.folder).glob("train-*"))
        written[runner] = [path.read_bytes() for path in files]
    assert written["local"] == written["beam"]
    keys = [key for key, _, _ in _records(str(tmp_path / "local" / "versions" / "*"))]
    assert keys == sorted(keys) and len(keys) == 20  # archive after archive, each in its order


def test_archives_listed_on_the_writer_processes_give_what_one_process_gives(tmp_path, tree):
    """Several archives on this disk are each listed by a pool process (a compressed one
    unpacked there): the same records, skipped files and error rows as one process lists."""
    (tree / "notes.txt").write_text("skipped")
    folder = tmp_path / "archives"
    folder.mkdir()
    for label in sorted(path.name for path in tree.iterdir() if path.is_dir()):
        with tarfile.open(folder / f"{label}.tar.gz", "w:gz") as archive:
            archive.add(tree / label, arcname=f"{label}/{label}")
            archive.add(tree / "notes.txt", arcname=f"{label}/notes.txt")
    (folder / "broken.tar").write_bytes(b"not a tar")
    made = {}
    for processes in ("1", "2"):
        result = _convert(folder, tmp_path / processes, "--processes", processes)
        files = sorted(Path(result.folder).glob("train-*"))
        info = result.info
        made[processes] = ([path.read_bytes() for path in files], info.skipped_files, info.errors)
    assert made["1"] == made["2"]
    records, skipped, errors = made["2"]
    assert skipped == 4 and errors == 1 and sum(map(len, records)) > 0
