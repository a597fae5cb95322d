"""An ImageNet-like corpus made from the photos in sample/photos: N JPEGs and a CSV manifest.

Each image is a random crop of one source photo rescaled to 300-640 px on its long side and
saved at quality 75-95; its label is the source photo. Seeded, so the same N gives the same
corpus. Run: python benchmarks/corpus.py OUT_DIR N [PHOTOS_DIR]
"""

import csv
import random
import sys
from pathlib import Path

from PIL import Image

PHOTOS = Path(__file__).resolve().parents[1] / "sample" / "photos"


def make_corpus(out: Path, count: int, photos: Path = PHOTOS, seed: int = 0) -> Path:
    """Writes out/images/<label>/<n>.jpg and out/manifest.csv; returns the manifest path."""
    manifest = out / "manifest.csv"
    if manifest.exists() and len(manifest.read_text().splitlines()) == count + 1:
        return manifest  # already made with this count
    rng = random.Random(seed)
    sources = {p.stem: Image.open(p).convert("RGB") for p in sorted(photos.glob("*.*g"))}
    labels = sorted(sources)
    rows = []
    for index in range(count):
        label = labels[index % len(labels)]
        photo = sources[label]
        width = rng.randint(photo.width // 2, photo.width)
        height = rng.randint(photo.height // 2, photo.height)
        left, top = rng.randint(0, photo.width - width), rng.randint(0, photo.height - height)
        tile = photo.crop((left, top, left + width, top + height))
        scale = rng.randint(300, 640) / max(tile.size)
        tile = tile.resize((max(1, round(width * scale)), max(1, round(height * scale))))
        name = f"images/{label}/{index:06d}.jpg"
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        tile.save(out / name, "JPEG", quality=rng.randint(75, 95))
        rows.append({"image_uri": name, "label": label})
    with open(manifest, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["image_uri", "label"])
        writer.writeheader()
        writer.writerows(rows)
    return manifest


if __name__ == "__main__":
    photos = Path(sys.argv[3]) if len(sys.argv) > 3 else PHOTOS
    print(make_corpus(Path(sys.argv[1]), int(sys.argv[2]), photos))
