"""transforms/manifest/archives.py: an archive's members as rows, by layout: class folders, a
tar of tars (ImageNet's train tar), a flat archive labelled by --ground_truth (ImageNet's
validation tar), WebDataset shards; and the split an archive's name says."""

import io
import tarfile

import pytest
from conftest import read_manifest
from made_archives import SYNSETS, imagenet_tars, webdataset_samples, webdataset_shard

from tfrecord_pipeline.transforms.errors import ErrorRow
from tfrecord_pipeline.transforms.manifest.archives import named_split
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig, SkippedFile


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory):
    return imagenet_tars(tmp_path_factory.mktemp("imagenet"))


def _rows(items) -> list[ManifestRow]:
    return [item for item in items if isinstance(item, ManifestRow)]


@pytest.mark.parametrize(
    "name, split",
    [
        ("ILSVRC2012_img_train.tar", "train"),
        ("ILSVRC2012_img_val.tar", "validation"),
        ("ILSVRC2012_img_test_v10102019.tar", "test"),
        ("flowers-validation-000001.tar", "validation"),
        ("000001.tar", ""),
        ("train_val.zip", ""),  # two splits said: none
        ("trainer.tar", ""),  # a word, not a part of one
    ],
)
def test_an_archive_s_name_says_its_rows_split_by_a_word(name, split):
    assert named_split(name) == split


def test_the_train_tar_of_tars_gives_each_image_its_synset_and_the_train_split(imagenet):
    rows = _rows(read_manifest(imagenet["train"]))
    assert len(rows) == 9 and {row.split for row in rows} == {"train"}
    assert {row.label for row in rows} == set(SYNSETS)
    row = min(rows, key=lambda row: row.key)
    assert row.key == "ILSVRC2012_img_train.tar#n01440764/n01440764_1.JPEG"
    assert row.image_uri.endswith("ILSVRC2012_img_train.tar#n01440764.tar#n01440764_1.JPEG")


def test_a_flat_archive_s_images_take_the_ground_truth_lines_in_the_order_of_their_names(
    imagenet,
):
    config = ReadConfig(ground_truth=str(imagenet["ground_truth"]))
    rows = _rows(read_manifest(imagenet["validation"], config=config))
    lines = imagenet["ground_truth"].read_text().split()
    given = dict(zip(sorted(row.key for row in rows), lines, strict=True))
    assert len(rows) == 5 and {row.split for row in rows} == {"validation"}
    assert {row.key: row.label for row in rows} == given
    assert "ILSVRC2012_img_val.tar#ILSVRC2012_val_00000003.JPEG" in given


def test_a_ground_truth_of_another_count_of_lines_labels_no_image(imagenet, tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("".join(imagenet["ground_truth"].read_text().splitlines(True)[:4]))
    items = read_manifest(imagenet["validation"], config=ReadConfig(ground_truth=str(short)))
    assert len(items) == 5 and all(isinstance(item, ErrorRow) for item in items)
    assert {(item.reason.value, item.split) for item in items} == {
        ("ground_truth_mismatch", "validation")
    }
    assert "4 lines for the 5 images at the top of ILSVRC2012_img_val.tar" in items[0].message


def test_a_flat_archive_without_ground_truth_is_skipped_and_said_once(imagenet):
    items = read_manifest(imagenet["validation"])
    assert sum(isinstance(item, SkippedFile) for item in items) == 5
    (said,) = [item for item in items if isinstance(item, ErrorRow)]
    assert said.reason.value == "flat_archive" and said.key == "ILSVRC2012_img_val.tar"
    assert said.message.startswith("5 images at its top and no class folders")


def test_flat_images_beside_rows_are_skipped_without_an_error_row(imagenet, tmp_path):
    archive = tmp_path / "pets.tar"
    with tarfile.open(archive, "w") as tar:
        for name in ("cat/1.jpg", "loose.jpg"):
            tar.add(imagenet["ground_truth"], arcname=name)  # listed, never decoded
    items = read_manifest(archive)
    assert [type(item).__name__ for item in items] == ["ManifestRow", "SkippedFile"]


def test_webdataset_shards_as_tar_writer_writes_them_give_cls_labels_and_json_features(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    webdataset_shard(folder / "000000.tar", webdataset_samples(4))
    webdataset_shard(folder / "000001.tar", webdataset_samples(2, first=4))
    config = ReadConfig(features=(("photographer", "bytes"),))
    items = [item for path in sorted(folder.iterdir()) for item in read_manifest(path, 0, config)]
    rows = _rows(items)
    assert len(rows) == len(items) == 6
    assert [row.label for row in rows] == ["0", "1", "2", "0", "0", "1"]
    assert {dict(row.features)["photographer"] for row in rows} == {b"p0", b"p1"}
    assert rows[4].key == "000001.tar#000004.jpg" and rows[0].split == "train"


def test_a_sample_labelled_only_by_its_json_takes_the_field_label_field_names(tmp_path):
    archive = tmp_path / "000000.tar"
    with tarfile.open(archive, "w") as tar:
        for name, data in (("a.jpg", b"image"), ("a.json", b'{"species": "cat", "label": 7}')):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (named,) = _rows(read_manifest(archive, config=ReadConfig(label_field="species")))
    (default,) = _rows(read_manifest(archive))
    assert (named.label, default.label) == ("cat", "7")
