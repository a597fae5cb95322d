"""Instance masks (--masks): COCO segmentations parsed, drawn on their grid, turned and
resized with their image's pixels, encoded as the Model Garden reads them."""

import io
import json

import numpy as np
import pytest
from detection_data import outline, rasterised, rle_counts, rle_string
from PIL import Image

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.image import masks
from tfrecord_pipeline.transforms.image.detection import Annotation, Frame, row_annotations
from tfrecord_pipeline.transforms.image.pixels import mask_png
from tfrecord_pipeline.transforms.image.placement import Placement, placed
from tfrecord_pipeline.transforms.manifest.coco import read_document
from tfrecord_pipeline.transforms.tfrecord.examples import feature_spec, object_features


def drawn(segmentation, width: int, height: int, normalized: bool = False) -> np.ndarray:
    """A mask as rows of pixels (height x width)."""
    data = masks.mask_bytes(segmentation, width, height, normalized)
    return np.frombuffer(data, np.uint8).reshape(width, height).T


def png_pixels(data: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(data))
    assert (image.format, image.mode) == ("PNG", "L")
    return np.asarray(image)


def test_a_rectangle_covers_the_pixels_whose_centres_it_holds():
    square = masks.parse([[1, 1, 4, 1, 4, 3, 1, 3]])
    want = np.zeros((5, 6), np.uint8)
    want[1:3, 1:4] = 1  # rows 1-2, columns 1-3: an edge on a pixel's side takes it on the right
    assert (drawn(square, 6, 5) == want).all()


def test_the_rings_of_an_object_are_unioned_and_clipped_to_the_image():
    rings = masks.parse([[-3, -3, 2, -3, 2, 2, -3, 2], [1, 1, 3, 1, 3, 3, 1, 3]])
    want = np.zeros((4, 4), np.uint8)
    want[0:2, 0:2] = 1  # the first ring, inside the image
    want[1:3, 1:3] = 1  # the second, overlapping it: still 1
    assert (drawn(rings, 4, 4) == want).all()


def test_polygons_match_the_textbook_rule_but_at_their_edges():
    """pycocotools' rule (ported) takes vertices to a fifth of a pixel and samples an edge
    near, not at, a pixel's centre: pixels away from the outline agree with the exact rule."""
    star = [30, 2, 36, 22, 58, 24, 40, 36, 46, 58, 30, 44, 12, 58, 18, 36, 2, 24, 24, 22]
    got, want = drawn(masks.parse([star]), 60, 60), rasterised([star], 60, 60)
    assert assert_on_the_outline(got, want) > 600


def assert_on_the_outline(got: np.ndarray, want: np.ndarray, edges=None) -> int:
    """Every pixel where the masks differ is next to (or on) the outline of `want` (or
    `edges`: its rings' outlines); returns how many pixels inside `want`, away from its
    edges, were so found equal (a mask all edge would pass anything)."""
    edges = outline(want) if edges is None else edges
    assert not ((got != want) & ~edges).any()
    return int((want.astype(bool) & ~edges).sum())


def test_normalised_polygons_are_scaled_to_the_grid():
    half = masks.parse([[0, 0, 0.5, 0, 0.5, 1, 0, 1]])
    want = np.zeros((4, 8), np.uint8)
    want[:, :4] = 1
    assert (drawn(half, 8, 4, normalized=True) == want).all()


# A 2 x 3 mask, column by column: 1 zero, 2 ones, 3 zeros.
RLE_PIXELS = np.array([[0, 1, 0], [1, 0, 0]], np.uint8)


def test_an_uncompressed_rle_is_drawn_column_by_column():
    assert (drawn(masks.parse({"size": [2, 3], "counts": [1, 2, 3]}), 3, 2) == RLE_PIXELS).all()


def test_a_compressed_rle_string_gives_the_same_pixels():
    assert (drawn(masks.parse({"size": [2, 3], "counts": "123"}), 3, 2) == RLE_PIXELS).all()


@pytest.mark.parametrize(
    "text, counts",
    [
        ("123", [1, 2, 3]),
        ("1232", [1, 2, 3, 4]),  # from the fourth count on, the change from two before: 4 - 2
        ("153L", [1, 5, 3, 1]),  # L = 48 + 28: -4 in 5 bits, 0x10 its sign; 1 = 5 - 4
        ("T3", [100]),  # T = 48 + 0x20 + 4: low bits 4, more follow; 3 << 5 = 96
    ],
)
def test_compressed_counts_decode_by_hand(text, counts):
    assert masks.decoded_counts(text).tolist() == counts
    assert rle_string(counts) == text  # the tests' own encoder writes the same


def test_an_rle_made_by_the_tests_round_trips():
    mask = rasterised([[3, 1, 17, 6, 9, 14]], 20, 16)
    counts = rle_counts(mask)
    for given in (counts, rle_string(counts)):
        assert (drawn(masks.parse({"size": [16, 20], "counts": given}), 20, 16) == mask).all()


@pytest.mark.parametrize(
    "segmentation, message",
    [
        (None, "must be a list of polygons or an RLE"),
        ([], "no polygon of 3 points or more"),
        ([[1, 2, 3, 4]], "no polygon of 3 points or more"),  # two points enclose nothing
        ([[1, 2, 3, 4, 5]], "segmentation[0] must be a list of x, y pairs"),
        ([[1, 2, 3, 4, 5, "6"]], "a coordinate must be a number"),
        ([[1, 2, 3, 4, 5, True]], "a coordinate must be a number"),
        ([[1, 2, 3, 4, 5, float("nan")]], "coordinates must be finite"),
        ({"size": [2, 3], "counts": [1, 2]}, "add up to height x width"),
        ({"size": [2, 3], "counts": [7, -1]}, "must be 0 or more"),
        ({"size": [2, 3], "counts": [1.0, 2, 3]}, "a list of integers or a string"),
        ({"size": [0, 3], "counts": []}, "size is [height, width]"),
        ({"size": [2, 3], "counts": "12 3"}, "' ' cannot be in an RLE's counts string"),
        ({"size": [2, 3], "counts": "12T"}, "ends inside a count"),
    ],
)
def test_unusable_segmentations_are_bad_annotations(segmentation, message):
    with pytest.raises(RowError) as raised:
        masks.parse(segmentation)
    assert raised.value.reason == Reason.BAD_ANNOTATION and message in raised.value.message


def test_a_short_ring_beside_a_usable_one_is_left_out():
    parsed = masks.parse([[1, 2, 3, 4], [0, 0, 2, 0, 2, 2]])
    assert [ring.tolist() for ring in parsed.rings] == [[0, 0, 2, 0, 2, 2]]


def test_an_rle_of_another_size_than_its_grid_is_a_bad_annotation():
    with pytest.raises(RowError, match="RLE mask of 3x2 for an image annotated at 2x3"):
        drawn(masks.parse({"size": [2, 3], "counts": [6]}), 2, 3)


def test_an_outline_far_longer_than_the_images_is_a_bad_annotation():
    """Drawing walks the outline: one with a coordinate of 1e12 would walk for hours."""
    with pytest.raises(RowError, match="over 16 times as long as the image's"):
        drawn(masks.parse([[0, 0, 1e12, 0, 0, 5]]), 8, 6)
    along = [0, 0, 8, 0, 8, 6, 0, 6] * 15  # the image's own outline, 15 times: drawn
    assert drawn(masks.parse([along]), 8, 6).all()


# A mask on a 5 x 3 grid whose every turn is told apart: one pixel, at column 1 of row 0.
ONE_PIXEL = masks.parse({"size": [3, 5], "counts": [3, 1, 11]})


@pytest.mark.parametrize("orientation", range(1, 9))
def test_a_mask_turns_as_exif_transpose_turns_the_image(orientation):
    grid = np.zeros((3, 5), np.uint8)
    grid[0, 1] = 1
    image = Image.fromarray(grid * 255)
    exif = image.getexif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    image.save(buffer, "PNG", exif=exif.tobytes())
    upright = Image.open(io.BytesIO(buffer.getvalue()))
    from PIL import ImageOps

    want = np.asarray(ImageOps.exif_transpose(upright)) // 255
    got = png_pixels(
        mask_png(masks.mask_bytes(ONE_PIXEL, 5, 3, False), (5, 3), orientation, want.shape[::-1])
    )
    assert (got == want).all()


def test_a_resized_mask_keeps_only_0_and_1():
    ring = [[2, 3, 50, 8, 30, 60]]
    got = png_pixels(
        mask_png(masks.mask_bytes(masks.parse(ring), 64, 64, False), (64, 64), 1, (21, 21))
    )
    assert got.shape == (21, 21) and set(np.unique(got)) == {0, 1}
    assert assert_on_the_outline(got, rasterised([[v / 64 * 21 for v in ring[0]]], 21, 21)) > 60


def _annotation(segmentation, **frame) -> Annotation:
    return Annotation(
        "1", 1.0, 1.0, 6.0, 4.0, frame=Frame(False, **frame), segmentation=masks.parse(segmentation)
    )


def test_placed_objects_carry_their_masks_turned_and_resized_with_the_pixels():
    """A file of 8 x 6 pixels whose EXIF orientation 6 (a quarter turn clockwise) was applied,
    then halved: the mask is 3 x 4, upright; a box outside the image goes, its mask with it."""
    placement = Placement(8, 6, 6, 6, 3, 4)
    inside = _annotation([[0, 0, 4, 0, 4, 6, 0, 6]])  # the left half of the file's grid
    outside = Annotation(
        "1",
        9.0,
        1.0,
        12.0,
        4.0,
        frame=Frame(False),
        segmentation=masks.parse([[9, 1, 12, 1, 12, 4]]),
    )
    (item,), dropped = placed([inside, outside], placement)
    assert dropped == 1
    want = np.zeros((4, 3), np.uint8)
    want[:2, :] = 1  # the file's left half is the upright image's top half
    assert (png_pixels(item.mask) == want).all()


def test_a_mask_drawn_on_the_upright_image_of_a_file_stored_unturned_is_turned_back():
    """Orientation 6, the JPEG stored as it is: the row's size says the outline was drawn on
    the upright 6 x 8 image, so it is turned back onto the file's 8 x 6 grid."""
    placement = Placement(8, 6, 6, 1, 8, 6)
    top_half = _annotation([[0, 0, 6, 0, 6, 4, 0, 4]], width=6, height=8)
    (item,), _ = placed([top_half], placement)
    want = np.zeros((6, 8), np.uint8)
    want[:, :4] = 1  # the upright image's top half is the file's left half
    assert (png_pixels(item.mask) == want).all()


def test_without_masks_objects_have_none_and_records_no_mask_feature():
    (item,), _ = placed([Annotation("1", 0.1, 0.1, 0.5, 0.5)], Placement(8, 6, 1, 1, 8, 6))
    assert item.mask == b""
    assert "image/object/mask" not in object_features((item,), (1,))
    assert "image/object/mask" not in feature_spec((), "jpeg", detection=True).dtypes
    spec = feature_spec((), "jpeg", detection=True, masks=True)
    assert spec.dtypes["image/object/mask"] == "string" and "image/object/mask" in spec.lists
    assert object_features((), (), masks=True)["image/object/mask"].items == ()


def _coco(annotation: dict) -> bytes:
    return json.dumps(
        {
            "images": [{"id": 1, "file_name": "a.jpg", "width": 8, "height": 6}],
            "annotations": [
                {"id": 1, "image_id": 1, "bbox": [1, 1, 2, 2], "category_id": 5, **annotation}
            ],
            "categories": [{"id": 5, "name": "five"}],
        }
    ).encode()


def test_coco_keeps_segmentations_only_with_masks():
    data = _coco({"segmentation": [[1, 1, 3, 1, 3, 3]]})
    ((image,), _), ((kept,), _) = read_document(data, "i.json"), read_document(data, "i.json", True)
    assert image.annotations[0].segmentation is None
    assert kept.annotations[0].segmentation.rings[0].tolist() == [1, 1, 3, 1, 3, 3]


@pytest.mark.parametrize(
    "annotation, message",
    [
        ({}, "annotations[0]: no segmentation, and --masks needs one for every object"),
        ({"segmentation": []}, "annotations[0]: segmentation has no polygon"),
        ({"segmentation": {"size": [6, 8], "counts": "x"}}, "annotations[0]: 'x' cannot be"),
    ],
)
def test_a_coco_annotation_without_a_usable_mask_makes_its_image_a_bad_annotation(
    annotation, message
):
    ((image,), _) = read_document(_coco(annotation), "i.json", True)
    assert image.annotations.reason == Reason.BAD_ANNOTATION
    assert image.annotations.message.startswith(message)


def test_jsonl_objects_carry_segmentations_in_their_boxes_units():
    fields = {
        "box_format": "xyxy_normalized",
        "objects": [
            {"bbox": [0, 0, 0.5, 1], "label": "a", "segmentation": [[0, 0, 0.5, 0, 0.5, 1]]},
            {"bbox": [0, 0, 1, 1], "label": "b", "segmentation": {"size": [2, 3], "counts": "123"}},
        ],
    }
    first, second = row_annotations(fields, str, with_masks=True)
    assert first.segmentation.rings[0].tolist() == [0, 0, 0.5, 0, 0.5, 1]
    assert second.segmentation == masks.Rle(2, 3, masks.decoded_counts("123"))
    assert row_annotations(fields, str)[0].segmentation is None
    fields["objects"][0].pop("segmentation")
    with pytest.raises(RowError, match=r"objects\[0\]: no segmentation"):
        row_annotations(fields, str, with_masks=True)
