"""Fixtures: small datasets made from ../shared/photos, and a helper to run the converter."""

import csv
import io
import json
import os
import random
from pathlib import Path

import pytest
from PIL import Image

from pipeline.convert import run

# The workplace's shared photos sit beside the repository; TFRP_PHOTOS may point elsewhere.
PHOTOS = Path(
    os.environ.get("TFRP_PHOTOS", Path(__file__).resolve().parents[2] / "shared" / "photos")
)
if not (PHOTOS / "astronaut.png").exists():
    pytest.exit(f"test photos not found in {PHOTOS}; set TFRP_PHOTOS to shared/photos", 1)
RGB_SOURCES = ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg")
# In-process DirectRunner: one worker keeps each pipeline test to about a second.
ONE_WORKER = ["--direct_num_workers=1", "--no_progress"]


def photo(name: str = "astronaut.png") -> Image.Image:
    return Image.open(PHOTOS / name).convert("RGB")


def crop(image: Image.Image, rng: random.Random, longest: int = 96) -> Image.Image:
    side = rng.randint(min(image.size) // 3, min(image.size))
    left = rng.randint(0, image.width - side)
    top = rng.randint(0, image.height - side)
    tile = image.crop((left, top, left + side, top + side))
    return tile.resize((longest, rng.randint(longest // 2, longest)))


def encode(image: Image.Image, fmt: str = "JPEG", **params) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def write_manifest(path: Path, rows: list[dict]) -> Path:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        return path
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def make_images(root: Path, per_class: int = 5, seed: int = 7) -> list[dict]:
    """JPEG crops under root/images/<label>/, labelled by source photo; manifest rows back."""
    rng = random.Random(seed)
    rows = []
    for source in RGB_SOURCES:
        label = source.split(".")[0]
        folder = root / "images" / label
        folder.mkdir(parents=True, exist_ok=True)
        image = photo(source)
        for index in range(per_class):
            name = f"images/{label}/{index}.jpg"
            (root / name).write_bytes(encode(crop(image, rng), quality=85))
            rows.append({"image_uri": name, "label": label})
    return rows


@pytest.fixture
def dataset(tmp_path) -> Path:
    """A 20-image CSV manifest with relative paths; returns the manifest path."""
    return write_manifest(tmp_path / "manifest.csv", make_images(tmp_path))


@pytest.fixture
def convert(tmp_path):
    """Run the converter in-process; returns the output folder and its DatasetInfo."""

    def _convert(manifest, *flags, output=None):
        output = str(output or tmp_path / "out")
        info = run(["--manifest", str(manifest), "--output", output, *flags, *ONE_WORKER])
        return Path(output), info

    return _convert
