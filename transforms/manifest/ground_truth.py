"""`--ground_truth`: the labels of a flat archive's images (images at its top, in no class
folder), one a line, in the order of the images' names, as ImageNet's validation tar is
labelled by the `synset_labels.txt` that tensorflow/tpu's imagenet_to_gcs.py reads.

A label by its line is only right while the lines and the images are the same in number and in
order, so nothing here guesses: a file whose lines mix integer ids and names, or that has an
empty line, is refused before the run (UserError), and an archive whose flat images are more
or fewer than the lines gives every one of them a `ground_truth_mismatch` error row rather than
a label that may belong to another image. The ILSVRC2012 devkit's
`ILSVRC2012_validation_ground_truth.txt` holds ILSVRC ids (1 to 1000) that are not the
sorted-synset order the train tar's folder names take: under `--preset tpu-imagenet`, whose
train labels are synset names, a file of integer ids is refused.
"""

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, UserError
from tfrecord_pipeline.transforms.manifest.labels import is_integer_label, one_kind
from tfrecord_pipeline.transforms.storage import fileio

DEVKIT_IDS = (
    "holds integer ids, as the devkit's ILSVRC2012_validation_ground_truth.txt does, whose ids "
    "are not the sorted-synset order the train tar's synset names are numbered in: give the "
    "validation synsets, one a line (synset_labels.txt, docs/inputs.md#imagenet)"
)


def parse_ground_truth(text: str, path: str, names_only: bool = False) -> tuple[str, ...]:
    """The labels of a `--ground_truth` file, one a line (trailing empty lines dropped);
    UserError for an empty line among them, a mix of integer ids and names, or, when
    `names_only` (the TPU ImageNet preset), integer ids."""
    labels = [line.strip() for line in text.rstrip().splitlines()]
    if not labels:
        raise UserError(f"--ground_truth {path}: the file lists no labels")
    if "" in labels:
        line = labels.index("") + 1
        raise UserError(f"--ground_truth {path}: line {line:,} is empty; every image needs one")
    try:
        one_kind(set(labels))
    except UserError as error:
        raise UserError(f"--ground_truth {path}: {error}") from None
    if names_only and is_integer_label(labels[0]):
        raise UserError(f"--ground_truth {path} {DEVKIT_IDS}")
    return tuple(labels)


def read_ground_truth(path: str, names_only: bool = False) -> tuple[str, ...]:
    """`parse_ground_truth` of the file at `path`; UserError when it cannot be read."""
    try:
        text = fileio.read_text(path)
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"--ground_truth: cannot read {path} ({error})") from None
    return parse_ground_truth(text, path, names_only)


def mismatch(key: str, uri: str, lines: int, images: int, archive: str, split: str) -> ErrorRow:
    """The error row of each flat image of an archive whose images and lines differ in
    number: which line is whose cannot be known."""
    message = (
        f"--ground_truth has {lines:,} lines for the {images:,} images at the top of {archive}: "
        "a label by its line could be another image's"
    )
    return ErrorRow(key, uri, Reason.GROUND_TRUTH_MISMATCH, message, split=split)
