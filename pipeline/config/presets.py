"""Label and shard conventions of the readers a dataset is written for: `--preset` names a set
of them, and a converted dataset that breaks the convention it is obviously meant for gets a
one-line warning (the readers would not fail, they would train on wrong labels).

The TPU reference ImageNet readers (tensorflow/tpu `models/official/resnet/imagenet_input.py`
and `models/official/efficientnet/imagenet_input.py`) read `train-*` and `validation-*` files,
sharded 1024 and 128 in their docstrings, named without an extension (efficientnet's
`holdout_shards` builds `train-00000-of-01024` and opens it), and subtract 1 from
`image/class/label`: their ids start at 1. Written from 0, one class becomes label -1 (resnet)
or an all-zero one-hot target (efficientnet, `one_hot(-1, 1000)`), and nothing fails.
"""

from typing import NamedTuple

from tfrecord_pipeline.dataset.metadata import DatasetInfo, label_count


class Preset(NamedTuple):
    """What a preset sets; a flag given on the command line (or a field given to
    `ConvertOptions`) wins over it."""

    label_offset: int
    num_shards: str
    reader: str  # who reads the dataset, as the warning names it
    extension: bool  # whether shard names end in the format's extension


PRESETS = {
    "tpu-imagenet": Preset(
        label_offset=1,
        num_shards="train=1024,validation=128",
        reader="the TPU reference ImageNet readers",
        extension=False,  # efficientnet's holdout_shards opens `train-%05d-of-01024` itself
    ),
}

# A dataset that looks like ImageNet: as many class names, in the reference readers' splits.
_IMAGENET_CLASSES = 1000
_IMAGENET_SPLITS = {"train", "validation"}


def one_based_warning(info: DatasetInfo) -> str | None:
    """A warning when records with label id 0 are obviously headed for a reader that
    subtracts 1: the dataset was made with `--preset tpu-imagenet` and holds label 0 (an
    explicit `--label_offset 0`, or integer labels from 0), or it has ImageNet's 1000 class
    names and its train and validation splits with ids from 0. None otherwise."""
    if not any(split.label_counts.get("0") for split in info.splits.values()):
        return None
    preset = PRESETS.get(info.options.get("preset") or "")
    if preset:
        # --label_offset numbers names only: integer labels are ids as written.
        integers = info.labels["kind"] == "integers"
        mend = "write the integer labels from 1" if integers else "convert with --label_offset 1"
        return (
            f"tfrecord-pipeline: warning: records with label 0 under --preset "
            f"{info.options['preset']}: {preset.reader} subtract 1 from image/class/label "
            f"and read them as -1 ({mend})"
        )
    classes = label_count(info.labels) if info.labels["kind"] == "names" else 0
    if classes == _IMAGENET_CLASSES and set(info.splits) >= _IMAGENET_SPLITS:
        reader = PRESETS["tpu-imagenet"].reader
        return (
            f"tfrecord-pipeline: warning: {classes} class names in train and validation "
            f"with ids from 0: {reader} subtract 1 from image/class/label and read one "
            "class as -1 (for them, convert with --preset tpu-imagenet or --label_offset 1)"
        )
    return None
