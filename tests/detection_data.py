"""A COCO detection dataset made from the photos in sample/photos, for any test that needs one.

`make_coco(root)` writes ~30 images (crops of the photos, resized; a few PNGs; a few JPEGs and
PNGs carrying an EXIF rotation) and `root/instances.json` with a few hundred boxes over them:
COCO's sparse category ids, crowds, given areas, boxes partly outside the image (clipped),
boxes with no area (dropped), and two images with no annotation (negatives). Seeded, so the
same bytes every time.

`expected_objects(dataset, ...)` says, independently of the converter's own code, what each
image's record must hold: every box that keeps an area after clipping, normalised to the
stored image and turned as the converter turns its pixels (a decoded image always; a JPEG
stored as it is never, unless `exif_transpose`).

With `masks=True` every annotation also has a segmentation, an octagon inscribed in its box
(a third of them with a second ring, a triangle over the box's corner): polygons, and for
crowds the same outline drawn as an RLE, uncompressed or as a compressed string in turn.
`expected_masks` draws each kept object's outline afresh on the stored image's grid (turned
and scaled as its box is), by the textbook rule: a pixel is inside when its centre is.
"""

import io
import json
import random
from pathlib import Path
from typing import NamedTuple

import numpy as np
from PIL import Image

PHOTOS = Path(__file__).resolve().parents[1] / "sample" / "photos"
SOURCES = ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "retina.jpg")
CATEGORIES = {
    1: "person",
    3: "car",
    17: "cat",
    18: "dog",
    44: "bottle",
    47: "cup",
    90: "toothbrush",
}
# (format, EXIF orientation) of the images, in turn; the rest are plain JPEGs.
SPECIAL = {
    3: ("PNG", 1),
    5: ("JPEG", 6),
    8: ("JPEG", 3),
    11: ("PNG", 8),
    14: ("JPEG", 8),
    17: ("JPEG", 5),
    20: ("PNG", 6),
    23: ("JPEG", 2),
    26: ("JPEG", 7),
}
NEGATIVES = (7, 19)  # images no annotation names


class CocoDataset(NamedTuple):
    instances: Path  # the COCO file; its file_names are images/<name>, beside it
    images: dict[str, tuple[str, int]]  # key (image id) -> (format, EXIF orientation)
    document: dict  # the COCO document as written
    outlines: dict[int, list[list[float]]] = {}  # with masks: annotation id -> its rings


def _image(rng: random.Random, photo: Image.Image) -> Image.Image:
    width, height = photo.size
    side_x = rng.randint(min(width, height) // 3, min(width, height))
    side_y = int(side_x * rng.uniform(0.55, 1.0))
    left, top = rng.randint(0, width - side_x), rng.randint(0, height - side_y)
    crop = photo.crop((left, top, left + side_x, top + side_y))
    scale = rng.randint(96, 224) / max(crop.size)
    size = (max(8, round(crop.width * scale)), max(8, round(crop.height * scale)))
    image = crop.resize(size, Image.Resampling.BILINEAR)
    return image.transpose(Image.Transpose.ROTATE_90) if rng.random() < 0.3 else image


def _encode(image: Image.Image, fmt: str, orientation: int) -> bytes:
    buffer = io.BytesIO()
    exif = Image.Exif()
    if orientation != 1:
        exif[0x0112] = orientation
    params = {"quality": 90} if fmt == "JPEG" else {}
    image.save(buffer, fmt, exif=exif.tobytes(), **params)
    return buffer.getvalue()


def _box(rng: random.Random, width: int, height: int, index: int) -> list[float]:
    """[x, y, w, h] in pixels: mostly inside, some across an edge, a few with no area."""
    if index % 23 == 5:  # no width: dropped
        return [round(rng.uniform(0, width), 2), round(rng.uniform(0, height), 2), 0.0, 5.0]
    if index % 29 == 7:  # wholly right of the image: dropped
        return [width + 3.0, 1.0, 10.0, 10.0]
    w, h = rng.uniform(4, width * 0.6), rng.uniform(4, height * 0.6)
    x = rng.uniform(-0.15 * w, width - 0.85 * w)
    y = rng.uniform(-0.15 * h, height - 0.85 * h)
    return [round(x, 2), round(y, 2), round(w, 2), round(h, 2)]


def make_coco(
    root: Path, images: int = 30, boxes_per_image: int = 11, seed: int = 18, masks: bool = False
) -> CocoDataset:
    rng = random.Random(seed)
    photos = [Image.open(PHOTOS / name).convert("RGB") for name in SOURCES]
    (root / "images").mkdir(parents=True, exist_ok=True)
    entries, annotations, kinds = [], [], {}
    for index in range(images):
        fmt, orientation = SPECIAL.get(index, ("JPEG", 1))
        image = _image(rng, photos[index % len(photos)])
        image_id = 1000 + 7 * index  # ids are not positions
        name = f"images/{SOURCES[index % len(SOURCES)].split('.')[0]}_{index}.{fmt.lower()}"
        (root / name).write_bytes(_encode(image, fmt, orientation))
        entries.append(
            {"id": image_id, "file_name": name, "width": image.width, "height": image.height}
        )
        kinds[str(image_id)] = (fmt, orientation)
        if index in NEGATIVES:
            continue
        for _ in range(rng.randint(boxes_per_image - 4, boxes_per_image + 4)):
            box = _box(rng, image.width, image.height, len(annotations))
            annotation = {
                "id": len(annotations) + 1,
                "image_id": image_id,
                "bbox": box,
                "category_id": rng.choice(sorted(CATEGORIES)),
                "iscrowd": int(rng.random() < 0.1),
            }
            if rng.random() < 0.5:
                annotation["area"] = round(box[2] * box[3] * rng.uniform(0.5, 0.9), 2)
            annotations.append(annotation)
    outlines = _add_segmentations(annotations, entries) if masks else {}
    document = {
        "info": {"description": "tfrecord-pipeline test data, from sample/photos"},
        "images": entries,
        "annotations": annotations,
        "categories": [{"id": id_, "name": name} for id_, name in CATEGORIES.items()],
    }
    instances = root / "instances.json"
    instances.write_text(json.dumps(document, indent=1))
    return CocoDataset(instances, kinds, document, outlines)


_OCTAGON = ((0.3, 0), (0.7, 0), (1, 0.3), (1, 0.7), (0.7, 1), (0.3, 1), (0, 0.7), (0, 0.3))


def _add_segmentations(annotations: list[dict], entries: list[dict]) -> dict[int, list]:
    """Each annotation's segmentation (made from its box, so the boxes drawn are as without
    masks), and the rings it was drawn from, by annotation id."""
    sizes = {entry["id"]: (entry["width"], entry["height"]) for entry in entries}
    outlines = {}
    for item in annotations:
        x, y, w, h = item["bbox"]
        rings = [[round(v, 2) for a, b in _OCTAGON for v in (x + a * w, y + b * h)]]
        if item["id"] % 3 == 0:
            rings.append([x, y, x + 0.25 * w, y, x, y + 0.25 * h])
        outlines[item["id"]] = rings
        if not item["iscrowd"]:
            item["segmentation"] = rings
            continue
        width, height = sizes[item["image_id"]]
        counts = rle_counts(rasterised(rings, width, height))
        compressed = item["id"] % 2 == 1
        item["segmentation"] = {
            "size": [height, width],
            "counts": rle_string(counts) if compressed else counts,
        }
    return outlines


def rasterised(rings, width: int, height: int) -> np.ndarray:
    """The rings drawn on a width x height grid (uint8, 1 inside): a pixel is inside a ring
    when its centre is (even-odd, left and top edges in), inside the mask when in any ring."""
    ys, xs = np.mgrid[0:height, 0:width] + 0.5
    mask = np.zeros((height, width), bool)
    for ring in rings:
        px, py = ring[0::2], ring[1::2]
        inside = np.zeros_like(mask)
        for x0, y0, x1, y1 in zip(px, py, px[1:] + px[:1], py[1:] + py[:1], strict=True):
            if y0 != y1:
                crossing = x0 + (ys - y0) * (x1 - x0) / (y1 - y0)
                inside ^= (ys >= min(y0, y1)) & (ys < max(y0, y1)) & (xs < crossing)
        mask |= inside
    return mask.astype(np.uint8)


def rle_counts(mask: np.ndarray) -> list[int]:
    """COCO's uncompressed RLE counts of a mask: runs of 0s and 1s, 0s first, column by
    column."""
    flat = mask.T.reshape(-1)
    changes = np.flatnonzero(np.diff(flat)) + 1
    counts = np.diff([0, *changes.tolist(), flat.size]).tolist()
    return [0, *counts] if flat[0] else counts


def rle_string(counts: list[int]) -> str:
    """COCO's compressed RLE string of counts: from the third count on, each as the change
    from the count two before; then 5 bits a character (+48), low bits first, 0x20 set on
    every character but a count's last, whose 0x10 is the sign."""
    text = []
    for index, count in enumerate(counts):
        value = count - counts[index - 2] if index > 2 else count
        while True:
            bits, value = value & 0x1F, value >> 5
            last = value == (-1 if bits & 0x10 else 0)
            text.append(chr(48 + bits + (0 if last else 0x20)))
            if last:
                break
    return "".join(text)


def _turned_point(x: float, y: float, orientation: int) -> tuple[float, float]:
    """A normalised point of a file's grid on its upright image, per EXIF orientation."""
    return {
        1: (x, y),
        2: (1 - x, y),
        3: (1 - x, 1 - y),
        4: (x, 1 - y),
        5: (y, x),
        6: (1 - y, x),
        7: (1 - y, 1 - x),
        8: (y, 1 - x),
    }[orientation]


def outline(mask: np.ndarray) -> np.ndarray:
    """The pixels of a mask next to (or on) its edge: those with a neighbour of the other
    value, among the 8 around them."""
    height, width = mask.shape
    padded = np.pad(mask, 1, mode="edge")
    near = [
        padded[1 + dy : 1 + dy + height, 1 + dx : 1 + dx + width]
        for dy in (-1, 0, 1)
        for dx in (-1, 0, 1)
    ]
    return np.any([pixels != mask for pixels in near], axis=0)


class ExpectedMask(NamedTuple):
    pixels: np.ndarray  # height x width, 1 inside
    edges: np.ndarray  # bool: the pixels near the outline of any of its rings


def expected_masks(
    dataset: CocoDataset,
    sizes: dict[str, tuple[int, int]],
    exif_transpose: bool = False,
    resized: bool = False,
) -> dict[str, list[ExpectedMask]]:
    """Per key, the masks of the objects `expected_objects` keeps, in order: each outline
    normalised to its file's grid, turned as the pixels are, drawn at the stored `sizes`
    (key -> width, height, as the records say)."""
    grids = {str(e["id"]): (e["width"], e["height"]) for e in dataset.document["images"]}
    expected: dict[str, list[ExpectedMask]] = {key: [] for key in grids}
    kept = expected_objects(dataset, exif_transpose, resized)
    ids = {key: iter(kept[key]) for key in kept}
    for item in dataset.document["annotations"]:
        key = str(item["image_id"])
        width, height = grids[key]
        x, y, w, h = item["bbox"]
        if min(x + w, width) <= max(x, 0) or min(y + h, height) <= max(y, 0):
            continue  # its box was dropped
        next(ids[key])
        fmt, orientation = dataset.images[key]
        turn = orientation if fmt != "JPEG" or exif_transpose or resized else 1
        stored_width, stored_height = sizes[key]
        rings = []
        for ring in dataset.outlines[item["id"]]:
            points = (
                _turned_point(u / width, v / height, turn)
                for u, v in zip(ring[0::2], ring[1::2], strict=True)
            )
            rings.append([c for u, v in points for c in (u * stored_width, v * stored_height)])
        edges = np.any([outline(rasterised([ring], *sizes[key])) for ring in rings], axis=0)
        expected[key].append(ExpectedMask(rasterised(rings, *sizes[key]), edges))
    assert all(next(rest, None) is None for rest in ids.values())
    return expected


def turned_box(box, orientation):
    """A normalised box of a file's grid on its upright image, per EXIF orientation."""
    x0, y0, x1, y1 = box
    return {
        1: (x0, y0, x1, y1),
        2: (1 - x1, y0, 1 - x0, y1),
        3: (1 - x1, 1 - y1, 1 - x0, 1 - y0),
        4: (x0, 1 - y1, x1, 1 - y0),
        5: (y0, x0, y1, x1),
        6: (1 - y1, x0, 1 - y0, x1),
        7: (1 - y1, 1 - x1, 1 - y0, 1 - x0),
        8: (y0, 1 - x1, y1, 1 - x0),
    }[orientation]


class ExpectedObject(NamedTuple):
    category_id: int
    name: str
    box: tuple[float, float, float, float]  # xmin, ymin, xmax, ymax, normalised, stored image
    is_crowd: int
    area_fraction: float | None  # a given area over the image's pixels (None: not given)


def expected_objects(
    dataset: CocoDataset, exif_transpose: bool = False, resized: bool = False
) -> dict[str, list[ExpectedObject]]:
    """Per key, in annotation order, what the record must hold after a conversion with these
    options (`resized`: every image made smaller, which decodes it: `--max_side` under 96,
    the shortest long side made here). Given areas are fractions of the image, so they hold
    at any size: the record's area is that fraction of its stored height x width."""
    sizes = {str(e["id"]): (e["width"], e["height"]) for e in dataset.document["images"]}
    expected: dict[str, list[ExpectedObject]] = {key: [] for key in sizes}
    for item in dataset.document["annotations"]:
        key = str(item["image_id"])
        width, height = sizes[key]
        x, y, w, h = item["bbox"]
        box = [x / width, y / height, (x + w) / width, (y + h) / height]
        box = tuple(min(1.0, max(0.0, value)) for value in box)
        if box[2] <= box[0] or box[3] <= box[1]:
            continue
        fmt, orientation = dataset.images[key]
        if fmt != "JPEG" or exif_transpose or resized:
            box = turned_box(box, orientation)
        area = item.get("area")
        fraction = None if area is None else area / (width * height)
        category = item["category_id"]
        expected[key].append(
            ExpectedObject(category, CATEGORIES[category], box, item["iscrowd"], fraction)
        )
    return expected
