"""`tfrecord-pipeline preview OUTPUT -o grid.png`: a contact sheet of what went into the shards.

Decoded from the records themselves (so it shows what training will see), labelled with the
class text and id: N per class, one row each, or N random records. A detection record's
classes are its objects' (each once), and its boxes are drawn. No TensorFlow.
"""

import io
import random

from PIL import Image, ImageDraw

from pipeline.reader import examples, open_dataset
from transforms import fileio
from transforms.examples import LABEL_KEY, LABEL_TEXT_KEY, OBJECT_LABEL_KEY, RAW_KEY

THUMB = 128
LABEL_HEIGHT = 14
OBJECT_TEXT_KEY = "image/object/class/text"
_BOX_SIDES = tuple(f"image/object/bbox/{side}" for side in ("xmin", "ymin", "xmax", "ymax"))


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
            for label in _labels(record, LABEL_KEY, OBJECT_LABEL_KEY):  # each label's row
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


def _labels(example: dict, key: str, object_key: str) -> list:
    """A record's label ids (or texts): its label, its several labels, or (a detection
    record) its objects' labels, each once."""
    if key in example:
        value = example[key]
        return value if isinstance(value, list) else [value]
    return list(dict.fromkeys(example.get(object_key, [])))


def _caption(example: dict) -> str:
    """The label text and id under a thumbnail; an image's several labels, comma-separated."""
    texts = _labels(example, LABEL_TEXT_KEY, OBJECT_TEXT_KEY)
    texts = [text.decode("utf-8", "replace") for text in texts]
    ids = ",".join(map(str, _labels(example, LABEL_KEY, OBJECT_LABEL_KEY)))
    return f"{','.join(texts)[:14]} ({ids})"


def _draw_boxes(draw: ImageDraw.ImageDraw, example: dict, left: int, top: int, size) -> None:
    """A detection record's boxes (normalised to its image) on its thumbnail at (left, top)."""
    for xmin, ymin, xmax, ymax in zip(*(example.get(key, []) for key in _BOX_SIDES), strict=False):
        corners = (left + xmin * size[0], top + ymin * size[1],
                   left + xmax * size[0], top + ymax * size[1])  # fmt: skip
        draw.rectangle(corners, outline="yellow")


def contact_sheet(rows: list[list[dict]]) -> Image.Image:
    columns = max((len(row) for row in rows), default=1)
    cell = (THUMB + 4, THUMB + LABEL_HEIGHT + 6)
    sheet = Image.new("RGB", (columns * cell[0] + 4, len(rows) * cell[1] + 4), "white")
    draw = ImageDraw.Draw(sheet)
    for y, row in enumerate(rows):
        for x, example in enumerate(row):
            thumb = _image(example).convert("RGB")
            thumb.thumbnail((THUMB, THUMB))
            left, top = 4 + x * cell[0], 4 + y * cell[1]
            sheet.paste(thumb, (left, top))
            _draw_boxes(draw, example, left, top, thumb.size)
            caption = _caption(example)
            draw.text((left, top + THUMB + 2), caption, fill="black")
    return sheet


def preview(output: str, split: str, target: str, per_class: int | None, sample: int | None,
            seed: int = 0) -> int:  # fmt: skip
    """Write the contact sheet PNG to `target`; returns how many images it shows."""
    folder, info = open_dataset(output)
    rows = pick(examples(folder, info, split), per_class, sample, seed)
    buffer = io.BytesIO()
    contact_sheet(rows).save(buffer, "PNG")
    fileio.write_bytes(target, buffer.getvalue())
    return sum(len(row) for row in rows)
