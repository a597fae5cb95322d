"""Rebuild the sample dataset in this folder from sample/photos (seeded, so reproducible).

Five classes, named after the source photo, of random crops rescaled to 128-320 px. Most are
baseline RGB JPEGs (stored as they are); a few are progressive, grayscale or PNG (re-encoded),
so the demo shows both paths. Run: python sample/make_sample.py [path/to/photos]
"""

import csv
import io
import json
import random
import sys
from pathlib import Path

from PIL import Image

CLASSES = ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "camera.png")
PER_CLASS = 8
# tags.jsonl: the same images with several labels each, for --multi_label (README).
TAGS = {
    "astronaut": ["person", "space"],
    "chelsea": ["animal", "cat"],
    "coffee": ["drink"],
    "rocket": ["space", "vehicle"],
    "camera": ["person", "photography"],
}


def variant(photo: Image.Image, rng: random.Random) -> Image.Image:
    width, height = photo.size
    side = rng.randint(min(width, height) // 2, min(width, height))
    left, top = rng.randint(0, width - side), rng.randint(0, height - side)
    crop = photo.crop((left, top, left + side, top + int(side * rng.uniform(0.7, 1.0))))
    scale = rng.randint(128, 320) / max(crop.size)
    return crop.resize((round(crop.width * scale), round(crop.height * scale)), Image.LANCZOS)


def encode(image: Image.Image, index: int, rng: random.Random) -> tuple[bytes, str]:
    buffer = io.BytesIO()
    if index == 7:
        image.save(buffer, "PNG")
        return buffer.getvalue(), "png"
    image.save(buffer, "JPEG", quality=rng.randint(75, 92), progressive=index == 6)
    return buffer.getvalue(), "jpg"


def main(photos: Path, here: Path) -> None:
    rng = random.Random(20261121)
    rows = []
    for source in CLASSES:
        photo = Image.open(photos / source)
        label = source.split(".")[0]
        (here / "images" / label).mkdir(parents=True, exist_ok=True)
        for index in range(PER_CLASS):
            data, ext = encode(variant(photo, rng), index, rng)
            name = f"images/{label}/{label}_{index}.{ext}"
            (here / name).write_bytes(data)
            rows.append({"image_uri": name, "label": label})
    with open(here / "manifest.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["image_uri", "label"])
        writer.writeheader()
        writer.writerows(rows)
    with open(here / "tags.jsonl", "w") as handle:
        for row in rows:
            handle.write(json.dumps({**row, "label": TAGS[row["label"]]}) + "\n")


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else here / "photos", here)
