"""transforms/manifest/ground_truth.py: a flat archive's labels, one a line, refused before the
run when they cannot be right (an empty line, ids beside names, the devkit's ids under the TPU
preset)."""

import pytest

from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.manifest.ground_truth import parse_ground_truth


def test_the_labels_are_the_lines_in_order_without_the_trailing_empty_ones():
    text = "n01440764\n n01443537 \nn01440764\n\n\n"
    assert parse_ground_truth(text, "s.txt") == ("n01440764", "n01443537", "n01440764")


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "--ground_truth s.txt: the file lists no labels"),
        (
            "n01440764\n\nn01443537\n",
            "--ground_truth s.txt: line 2 is empty; every image needs one",
        ),
        ("n01440764\n65\nn01443537\n", "--ground_truth s.txt: labels mix integer ids ('65') and"),
    ],
)
def test_a_file_whose_lines_cannot_all_be_labels_is_one_line(text, says):
    with pytest.raises(UserError) as raised:
        parse_ground_truth(text, "s.txt")
    assert str(raised.value).startswith(says) and "\n" not in str(raised.value)


def test_the_devkit_s_ilsvrc_ids_are_refused_under_the_tpu_preset_and_ids_taken_without():
    devkit = "490\n361\n171\n822\n"  # ILSVRC2012_validation_ground_truth.txt's first lines
    assert parse_ground_truth(devkit, "g.txt") == ("490", "361", "171", "822")
    with pytest.raises(UserError, match="ILSVRC2012_validation_ground_truth.txt"):
        parse_ground_truth(devkit, "g.txt", names_only=True)
