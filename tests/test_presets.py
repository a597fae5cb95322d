"""pipeline/config/presets.py: the warning for records with label 0 headed for readers that
subtract 1 (the preset's shard counts and the warning printed by a run: test_consumers.py)."""

import pytest
from conftest import dataset_info

from tfrecord_pipeline.config.presets import one_based_warning
from tfrecord_pipeline.dataset.metadata import SplitInfo

NAMES = {"kind": "names", "offset": 0, "names": [f"n{number:04d}" for number in range(1000)]}


def _info(label_counts: dict, splits=("train", "validation"), labels=NAMES, preset=None):
    split = SplitInfo(sum(label_counts.values()), 0, 0, label_counts, [])
    options = {"preset": preset}
    return dataset_info(splits=dict.fromkeys(splits, split), labels=labels, options=options)


def test_records_with_label_0_under_the_preset_are_warned_whatever_the_labels():
    integers = {"kind": "integers", "offset": 0}
    warning = one_based_warning(_info({"0": 2, "1": 5}, ["all"], integers, "tpu-imagenet"))
    assert warning.startswith("tfrecord-pipeline: warning: records with label 0 under --preset")
    assert "TPU reference ImageNet readers" in warning and "\n" not in warning


def test_a_dataset_shaped_like_imagenet_with_ids_from_0_is_warned():
    warning = one_based_warning(_info({"0": 1, "999": 1}))
    assert "1000 class names in train and validation with ids from 0" in warning


@pytest.mark.parametrize(
    "info",
    [
        _info({"1": 3}, preset="tpu-imagenet"),  # no record with label 0
        _info({"0": 0, "1": 3}),  # a label 0 with no records
        _info({"0": 3}, splits=("train", "test")),  # not ImageNet's splits
        _info({"0": 3}, labels={**NAMES, "names": NAMES["names"][:999]}),
        _info({"0": 3}, labels={"kind": "integers", "offset": 0}),
    ],
    ids=["from-1", "no-records-at-0", "other-splits", "999-classes", "integers"],
)
def test_nothing_is_said_when_no_reader_would_read_label_0_as_minus_1(info):
    assert one_based_warning(info) is None
