"""transforms/manifest/splits.py: a row's split from its own value or a hash of its key, and the
--split spec."""

from collections import Counter

import pytest

from tfrecord_pipeline.transforms.errors import Reason, RowError, UserError
from tfrecord_pipeline.transforms.manifest.splits import (
    assign_split,
    check_split_name,
    parse_split_spec,
)


def test_split_assignment_is_stable_and_follows_fractions():
    spec = parse_split_spec("train=0.8,validation=0.1,test=0.1")
    splits = [assign_split(f"img/{i}.jpg", "", spec) for i in range(20000)]
    assert splits == [assign_split(f"img/{i}.jpg", "", spec) for i in range(20000)]
    counts = Counter(splits)
    assert abs(counts["train"] / 20000 - 0.8) < 0.02
    assert abs(counts["test"] / 20000 - 0.1) < 0.02


def test_own_split_wins_and_default_is_train():
    spec = parse_split_spec("train=0.5,validation=0.5")
    assert assign_split("k", "Validation ", spec) == "validation"
    assert assign_split("k", "", None) == "train"
    with pytest.raises(RowError) as error:
        assign_split("k", "my split", None)
    assert error.value.reason is Reason.BAD_SPLIT


@pytest.mark.parametrize("text", ["train=0.9", "train=0.5,train=0.5", "a=x", "train", "a=0,b=1"])
def test_bad_split_specs_are_user_errors(text):
    with pytest.raises(UserError):
        parse_split_spec(text)


def test_a_percentage_is_refused_saying_shares_are_fractions_and_which_one_was_meant():
    """`--split train=80,validation=20` said only `bad or repeated entry 'train=80'`."""
    with pytest.raises(UserError) as error:
        parse_split_spec("train=80,validation=20")
    assert str(error.value) == (
        "--split: 'train=80': a share is a fraction of 1, not a percentage (shares sum to 1: "
        "train=0.8, not train=80)"
    )


def test_a_split_name_is_at_most_64_characters_in_a_row_and_in_the_spec():
    """A split names files: 194 characters made a staged file's name too long for the file
    system, and the whole run failed with a traceback."""
    assert assign_split("k", "s" * 64, None) == "s" * 64
    with pytest.raises(RowError) as error:
        assign_split("k", "s" * 65, None)
    assert error.value.reason is Reason.BAD_SPLIT
    assert "at most 64 characters" in str(error.value) and len(str(error.value)) < 160
    assert parse_split_spec(f"{'v' * 64}=1").names == ("v" * 64,)
    with pytest.raises(UserError, match="at most 64 characters"):
        parse_split_spec(f"train=0.5,{'v' * 65}=0.5")


def test_a_split_name_is_the_whole_text_a_final_line_break_included():
    """`$` matched before a final line break: `--split 'train=0.5,val\\n=0.5'` wrote a shard
    named `val\\n-00000-of-00001.tfrecord`."""
    with pytest.raises(UserError):
        parse_split_spec("train=0.5,val\n=0.5")
    with pytest.raises(RowError):
        check_split_name("val\n")
