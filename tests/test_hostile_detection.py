"""Detection, multi-label and preset inputs as a hostile user writes them: each test names what
must hold where an earlier build did not."""

import struct

import pytest
from conftest import read_manifest, write_manifest
from detection_data import make_coco

from pipeline.convert import run
from pipeline.preview import preview
from transforms.detection import Annotation, Frame, Placement, placed
from transforms.manifest import ManifestRow, ReadConfig
from transforms.sources import describe


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def test_a_box_that_float32_cannot_tell_from_a_line_is_dropped_not_stored():
    # 1e-12 pixels wide: distinct in float64, one value once the record stores it as float32.
    tiny = Annotation("a", 1.0, 1.0, 1.0 + 1e-12, 1.0 + 1e-12, frame=Frame(False))
    kept, dropped = placed([tiny], Placement(149, 139, 1, 1, 149, 139))
    assert dropped == 1, [(_float32(o.xmin), _float32(o.xmax)) for o in kept]


def test_a_jsonl_manifest_whose_first_row_is_over_64_kb_is_still_detection(tmp_path):
    # A crowded image: its objects make the first line longer than the launcher's first read.
    objects = [{"bbox": [n % 100, n % 90, 3, 3], "label": "person"} for n in range(1500)]
    rows = [{"image_uri": "a.jpg", "box_format": "xywh", "objects": objects},
            {"image_uri": "b.jpg", "box_format": "xywh", "objects": []}]  # fmt: skip
    manifest = write_manifest(tmp_path / "crowd.jsonl", rows)
    assert len(manifest.read_text().split("\n")[0]) > 64 << 10
    assert describe(str(manifest), 0, ReadConfig()).detection
    config = ReadConfig(detection=True)
    read = read_manifest(manifest, config=config)
    assert all(isinstance(item, ManifestRow) for item in read), read
    assert len(read[0].objects) == 1500


@pytest.fixture(scope="module")
def coco_dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    coco = make_coco(root, images=8, boxes_per_image=3)
    output = root / "out"
    run(["--manifest", str(coco.instances), "--output", str(output), "--no_progress"])
    return output


def test_preview_of_a_detection_dataset_shows_its_images_by_object_class(coco_dataset, tmp_path):
    shown = preview(str(coco_dataset), "train", str(tmp_path / "grid.png"), 2, None)
    assert shown > 0
