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
"""

import io
import json
import random
from pathlib import Path
from typing import NamedTuple

from PIL import Image

PHOTOS = Path(__file__).resolve().parents[1] / "sample" / "photos"
SOURCES = ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "retina.jpg")
CATEGORIES = {1: "person", 3: "car", 17: "cat", 18: "dog", 44: "bottle", 47: "cup",
              90: "toothbrush"}  # fmt: skip
# (format, EXIF orientation) of the images, in turn; the rest are plain JPEGs.
SPECIAL = {3: ("PNG", 1), 5: ("JPEG", 6), 8: ("JPEG", 3), 11: ("PNG", 8), 14: ("JPEG", 8),
           17: ("JPEG", 5), 20: ("PNG", 6), 23: ("JPEG", 2), 26: ("JPEG", 7)}  # fmt: skip
NEGATIVES = (7, 19)  # images no annotation names


class CocoDataset(NamedTuple):
    instances: Path  # the COCO file; its file_names are images/<name>, beside it
    images: dict[str, tuple[str, int]]  # key (image id) -> (format, EXIF orientation)
    document: dict  # the COCO document as written


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
    root: Path, images: int = 30, boxes_per_image: int = 11, seed: int = 18
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
        entries.append({"id": image_id, "file_name": name, "width": image.width,
                        "height": image.height})  # fmt: skip
        kinds[str(image_id)] = (fmt, orientation)
        if index in NEGATIVES:
            continue
        for _ in range(rng.randint(boxes_per_image - 4, boxes_per_image + 4)):
            box = _box(rng, image.width, image.height, len(annotations))
            annotation = {"id": len(annotations) + 1, "image_id": image_id, "bbox": box,
                          "category_id": rng.choice(sorted(CATEGORIES)),
                          "iscrowd": int(rng.random() < 0.1)}  # fmt: skip
            if rng.random() < 0.5:
                annotation["area"] = round(box[2] * box[3] * rng.uniform(0.5, 0.9), 2)
            annotations.append(annotation)
    document = {
        "info": {"description": "tfrecord-pipeline test data, from sample/photos"},
        "images": entries,
        "annotations": annotations,
        "categories": [{"id": id_, "name": name} for id_, name in CATEGORIES.items()],
    }
    instances = root / "instances.json"
    instances.write_text(json.dumps(document, indent=1))
    return CocoDataset(instances, kinds, document)


def _turned(box, orientation):
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
            box = _turned(box, orientation)
        area = item.get("area")
        fraction = None if area is None else area / (width * height)
        category = item["category_id"]
        expected[key].append(
            ExpectedObject(category, CATEGORIES[category], box, item["iscrowd"], fraction)
        )
    return expected
