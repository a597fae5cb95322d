"""`tfrecord-pipeline preview OUTPUT -o grid.png`: a contact sheet of what went into the shards.

Decoded from the records themselves (so it shows what training will see), labelled with the
class text and id, and a detection record's boxes drawn where its record puts them: N per class
(an image in the row of each label it holds), one row each, or N random records, written in
the format the file's extension names. No TensorFlow.
"""

import io
import random

from PIL import Image, ImageDraw

from tfrecord_pipeline.read.reader import examples, open_dataset, out_extension, write_out
from tfrecord_pipeline.transforms.tfrecord.examples import (
    LABEL_KEY,
    LABEL_TEXT_KEY,
    OBJECT_LABEL_KEY,
    RAW_KEY,
)

THUMB = 128
LABEL_HEIGHT = 14
CAPTION_CHARS = 21  # what a thumbnail's width holds in Pillow's default font
BOX_COLOURS = ("#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4")
_BOX_KEYS = tuple(f"image/object/bbox/{side}" for side in ("xmin", "ymin", "xmax", "ymax"))
# Each extension `-o` takes: the format it names and how Pillow writes it (the lossy two at a
# quality that keeps the captions legible).
FORMATS = {
    ".png": ("PNG", {}),
    ".jpg": ("JPEG", {"quality": 90}),
    ".jpeg": ("JPEG", {"quality": 90}),
    ".webp": ("WEBP", {"quality": 90}),
}


def image_format(target: str) -> tuple[str, dict]:
    """The format (and Pillow's options for it) that `target`'s extension names."""
    return FORMATS[out_extension(target, FORMATS, "preview")]


def _image(example: dict) -> Image.Image:
    if RAW_KEY in example:
        size = (example["image/width"], example["image/height"])
        mode = "L" if example["image/channels"] == 1 else "RGB"
        return Image.frombytes(mode, size, example[RAW_KEY])
    return Image.open(io.BytesIO(example["image/encoded"]))


def pick(records, per_class: int | None, sample: int | None, seed: int) -> list[list[dict]]:
    """Rows of records: per class (sorted by label id) or one row set of a random sample."""
    if per_class:
        rows: dict[int, list[dict]] = {}
        for record in records:
            for label in sorted(set(_labels(record))):  # in the row of each label it holds
                row = rows.setdefault(label, [])
                if len(row) < per_class:
                    row.append(record)
        return [rows[label] for label in sorted(rows)]
    chosen: list[dict] = []
    rng = random.Random(seed)
    for seen, record in enumerate(records):  # reservoir sampling: one pass, bounded memory
        if len(chosen) < sample:
            chosen.append(record)
        elif (slot := rng.randrange(seen + 1)) < sample:
            chosen[slot] = record
    columns = max(1, int(len(chosen) ** 0.5 + 0.999))
    return [chosen[i : i + columns] for i in range(0, len(chosen), columns)]


def _as_list(value) -> list:
    """A feature's values as a list: a scalar, or a list feature's (several labels)."""
    return value if isinstance(value, list) else [value]


def _labels(example: dict) -> list:
    """The label ids a record holds: its label, its labels, or its objects' labels."""
    return _as_list(example.get(LABEL_KEY, example.get(OBJECT_LABEL_KEY, [])))


def _caption(example: dict) -> str:
    """The label text and id under a thumbnail; several, comma-separated, each once."""
    key = LABEL_TEXT_KEY if LABEL_KEY in example else "image/object/class/text"
    texts = dict.fromkeys(
        text.decode("utf-8", "replace") for text in _as_list(example.get(key, []))
    )
    ids = ",".join(map(str, dict.fromkeys(_labels(example))))
    caption = f"{','.join(texts)[:14]} ({ids})"
    return caption if len(caption) <= CAPTION_CHARS else caption[: CAPTION_CHARS - 2] + ".."


def _draw_boxes(thumb: Image.Image, example: dict) -> None:
    """A detection record's boxes on its thumbnail, one colour a label id (normalised
    coordinates: the thumbnail's size scales them)."""
    if _BOX_KEYS[0] not in example:
        return
    draw, (width, height) = ImageDraw.Draw(thumb), thumb.size
    boxes = zip(example[OBJECT_LABEL_KEY], *(example[k] for k in _BOX_KEYS), strict=True)
    for label, *box in boxes:
        xmin, ymin, xmax, ymax = box
        outline = BOX_COLOURS[label % len(BOX_COLOURS)]
        draw.rectangle((xmin * width, ymin * height, xmax * width, ymax * height), outline=outline)


def contact_sheet(rows: list[list[dict]]) -> Image.Image:
    columns = max((len(row) for row in rows), default=1)
    cell = (THUMB + 4, THUMB + LABEL_HEIGHT + 6)
    sheet = Image.new("RGB", (columns * cell[0] + 4, len(rows) * cell[1] + 4), "white")
    draw = ImageDraw.Draw(sheet)
    for y, row in enumerate(rows):
        for x, example in enumerate(row):
            thumb = _image(example).convert("RGB")
            thumb.thumbnail((THUMB, THUMB))
            _draw_boxes(thumb, example)
            left, top = 4 + x * cell[0], 4 + y * cell[1]
            sheet.paste(thumb, (left, top))
            caption = _caption(example)
            draw.text((left, top + THUMB + 2), caption, fill="black")
    return sheet


def preview(
    output: str, split: str, target: str, per_class: int | None, sample: int | None, seed: int = 0
) -> int:
    """Write the contact sheet to `target` (local or gs://), in the format its extension
    names; returns how many images it shows."""
    image_type, options = image_format(target)  # before reading anything
    folder, info = open_dataset(output)
    rows = pick(examples(folder, info, split), per_class, sample, seed)
    buffer = io.BytesIO()
    contact_sheet(rows).save(buffer, image_type, **options)
    write_out(target, buffer.getvalue())
    return sum(len(row) for row in rows)
