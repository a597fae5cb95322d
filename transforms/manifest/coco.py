"""COCO instances files (`instances_train2017.json`): one JSON document of `images`,
`annotations` and `categories`, read as one manifest whose rows are its images.

A row's key is its image's `id` as text, which is what COCO evaluation and the TPU detection
readers take `image/source_id` to be (the Model Garden parses it as an integer), and stays the
same from run to run. An annotation's `bbox` is [x, y, width, height] in pixels of the image's
grid, which the image's `width` and `height` describe (transforms/image/placement.py); its
`category_id` is its label, kept as the integer it is (COCO's ids run 1-90 with gaps, and
models are configured for them), its category's `name` the label's text. An image no
annotation names is a negative: a row with no objects. An annotation's `segmentation` (its
mask, transforms/image/masks.py) is kept only with --masks.

The document is parsed whole, so reading it holds it in memory (docs/detection.md gives the
figures); the launcher reads only its start, and on Beam one worker reads the file.
"""

import json
import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, RowError, shown
from tfrecord_pipeline.transforms.errors import bad_annotation as bad
from tfrecord_pipeline.transforms.image import masks
from tfrecord_pipeline.transforms.image.detection import Annotation, Frame, box_corners
from tfrecord_pipeline.transforms.manifest.lines import check_unicode

# The keys of a COCO document's top level; a `.json` manifest whose first key is one of them
# is read as COCO (a JSONL file's first line holds a row, whose keys are columns).
TOP_LEVEL_KEYS = frozenset({"info", "licenses", "images", "annotations", "categories", "type"})
_FIRST_KEY = re.compile(r'\s*\{\s*"((?:[^"\\]|\\.)*)"\s*:')
IMAGES, ANNOTATIONS = "images", "annotations"


def is_coco_start(text: str) -> bool:
    """Whether the start of a `.json` manifest is a COCO document's rather than a JSONL file's.

    A JSONL record is one line, so a first line that parses as an object is a JSONL row,
    unless it is a whole COCO document on one line (it has images and annotations). A first
    line that does not parse is a document spanning lines (pretty-printed, or one line longer
    than the start read), COCO when its first key is a COCO key."""
    first_line = text.split("\n", 1)[0]
    try:
        parsed = json.loads(first_line)
    except ValueError:
        match = _FIRST_KEY.match(text)
        return bool(match) and match[1] in TOP_LEVEL_KEYS
    return isinstance(parsed, dict) and IMAGES in parsed and ANNOTATIONS in parsed


def source_of(path: str, section: str, index: int) -> str:
    """Where an entry of the document is, for error reports: `<file>#images[3]`."""
    return f"{path}#{section}[{index}]"


class CocoImage(NamedTuple):
    """An image entry, with its annotations parsed (or why they cannot be)."""

    index: int  # its place in `images`
    fields: dict  # the entry as the file gives it, plus the key and image path as a row has them
    annotations: tuple[Annotation, ...] | RowError


def read_document(
    data: bytes, path: str, with_masks: bool = False
) -> tuple[list[CocoImage], list[ErrorRow]]:
    """The images of a COCO document, and error rows for what no image can carry: a document
    that is not COCO (one row, for the file) and annotations naming no image (one each).
    `with_masks`: the annotations' segmentations are kept (--masks)."""
    try:
        document = json.loads(data, object_hook=_with_masks if with_masks else _without_masks)
        check_unicode(data, document)
        images, annotations, categories = _sections(document)
        names = _category_names(categories)
    except (ValueError, RowError) as error:
        reason = error.reason if isinstance(error, RowError) else Reason.BAD_ROW
        message = error.message if isinstance(error, RowError) else f"not JSON: {error}"
        return [], [ErrorRow(path, path, reason, f"not a usable COCO file: {message}")]
    del document
    frames: dict[object, Frame] = {}
    for entry in images:
        if isinstance(entry, dict) and entry.get("id") is not None:
            frames.setdefault(_id_key(entry["id"]), _image_frame(entry))
    by_image, orphans = _group(annotations, frames, names, path, with_masks)
    read = [_image(index, entry, by_image) for index, entry in enumerate(images)]
    return read, orphans


def _without_masks(entry: dict) -> dict:
    """A JSON object as parsed, an annotation's `segmentation` let go as soon as it is read:
    polygons and RLE masks are most of a COCO file, and no record holds them."""
    entry.pop("segmentation", None)
    return entry


def _with_masks(entry: dict) -> dict:
    """A JSON object as parsed, an annotation's `segmentation` parsed as soon as it is read
    into its compact form (or the error that makes its image a `bad_annotation`): the
    document's lists of coordinates are let go as it is read, not all held at once."""
    if "segmentation" in entry:
        try:
            entry["segmentation"] = masks.parse(entry["segmentation"])
        except RowError as error:
            entry["segmentation"] = error
    return entry


def _sections(document: object) -> tuple[list, list, list]:
    if not isinstance(document, dict):
        raise bad(f"the document is {type(document).__name__}, not an object")
    sections = []
    for name in (IMAGES, ANNOTATIONS, "categories"):
        section = document.get(name)
        if not isinstance(section, list):
            raise bad(f"{name} must be a list, not {shown(section, 40)}")
        sections.append(section)
    return tuple(sections)


def _id_key(value: object) -> object:
    """An id as a dict key: 3 and 3.0 and True are one key to Python, not to COCO."""
    return (type(value).__name__, value)


def _category_names(categories: list) -> dict[int, str]:
    """Category id → name; a category without an integer id or a name, or an id listed twice
    with two names, makes the file unusable (which would its annotations mean?)."""
    names: dict[int, str] = {}
    for index, category in enumerate(categories):
        if not isinstance(category, dict):
            raise bad(f"categories[{index}] is not an object")
        id_, name = category.get("id"), category.get("name")
        if isinstance(id_, bool) or not isinstance(id_, int) or not isinstance(name, str):
            raise bad(f"categories[{index}] needs an integer id and a name, has {shown(category)}")
        if names.setdefault(id_, name) != name:
            raise bad(f"category id {id_} is listed twice, as {names[id_]!r} and {name!r}")
    return names


def _image_frame(entry: dict) -> Frame:
    """An image's pixel frame: its width and height when it gives usable ones."""
    width, height = entry.get("width"), entry.get("height")
    sides = (width, height)
    if all(isinstance(side, int) and not isinstance(side, bool) and side > 0 for side in sides):
        return Frame(False, width, height)
    return Frame(False)


def _group(
    annotations: list, frames: dict, names: dict[int, str], path: str, with_masks: bool
) -> tuple[dict, list[ErrorRow]]:
    """Annotations by image id (each parsed, or the RowError of its image), and error rows for
    annotations whose image is not listed."""
    by_image: dict[object, list | RowError] = {}
    seen_ids: set = set()
    orphans = []
    for index, item in enumerate(annotations):
        image_id = item.get("image_id") if isinstance(item, dict) else None
        key = _id_key(image_id)
        if key not in frames:
            message = f"annotation for image id {shown(image_id)}, which images does not list"
            where = source_of(path, ANNOTATIONS, index)
            orphans.append(ErrorRow(where, where, Reason.BAD_ANNOTATION, message))
            continue
        parsed = by_image.setdefault(key, [])
        if isinstance(parsed, RowError):
            continue
        try:
            annotation = _annotation(item, index, frames[key], names, seen_ids, with_masks)
            parsed.append(annotation)
        except RowError as error:
            by_image[key] = error
    return by_image, orphans


def _annotation(
    item: dict, index: int, frame: Frame, names: dict, seen_ids: set, with_masks: bool
) -> Annotation:
    where = f"annotations[{index}]"
    if "id" in item:
        id_key = _id_key(item["id"])
        if id_key in seen_ids:
            raise bad(f"{where}: annotation id {shown(item['id'])} is listed twice")
        seen_ids.add(id_key)
    category = item.get("category_id")
    if isinstance(category, bool) or category not in names:
        raise bad(f"{where}: category_id {shown(category)} is not in categories")
    corners = box_corners(item.get("bbox"), "xywh", where)
    crowd = item.get("iscrowd", 0)
    if crowd not in (0, 1) or isinstance(crowd, float):
        raise bad(f"{where}: iscrowd must be 0 or 1, not {shown(crowd)}")
    area = item.get("area")
    if area is not None:
        if isinstance(area, bool) or not isinstance(area, int | float) or not area >= 0:
            raise bad(f"{where}: area must be a number of 0 or more, not {shown(area)}")
        area = float(area)
    segmentation = _segmentation(item, where) if with_masks else None
    label, text = str(category), names[category]
    return Annotation(label, *corners, bool(crowd), area, frame, text, segmentation)


def _segmentation(item: dict, where: str) -> masks.Segmentation:
    """An annotation's mask, parsed as the file was read (`_with_masks`)."""
    if "segmentation" not in item:
        raise bad(f"{where}: {masks.MISSING}")
    segmentation = item["segmentation"]
    if isinstance(segmentation, RowError):
        raise bad(f"{where}: {segmentation.message}")
    return segmentation


def _image(index: int, entry: object, by_image: dict) -> CocoImage:
    """An image entry as a row's fields: its id (as text) the key, its file_name the image."""
    if not isinstance(entry, dict):
        return CocoImage(index, {}, bad(f"images[{index}] is not an object"))
    id_, file_name = entry.get("id"), entry.get("file_name")
    if isinstance(id_, bool) or not isinstance(id_, int | str) or not str(id_).strip():
        return CocoImage(index, entry, bad(f"images[{index}]: id must be an integer or text"))
    fields = {**entry, "key": str(id_), "image_uri": file_name}
    annotations = by_image.get(_id_key(id_), [])
    if isinstance(annotations, RowError):
        return CocoImage(index, fields, annotations)
    return CocoImage(index, fields, tuple(annotations))


def read_images(
    data: bytes, path: str, make_row: Callable[[CocoImage], object], with_masks: bool = False
) -> Iterator[object]:
    """The rows (`make_row` of each image) and error rows of a COCO document."""
    images, orphans = read_document(data, path, with_masks)
    yield from orphans
    for image in images:
        yield make_row(image)
