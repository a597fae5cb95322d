"""pipeline/config/option.py: an option's synopsis, default in words and check, as --help-all,
the docs' table and `prepare` use them (the table and --help-all checked whole:
test_cli_help.py and the docs' test)."""

import pytest

from tfrecord_pipeline.config.flags import FLAGS
from tfrecord_pipeline.config.option import Option, default_text, failure, help_text, synopsis
from tfrecord_pipeline.config.values import FLOAT, POSITIVE, TEXT, choice

BY_NAME = {option.name: option for option in FLAGS}


@pytest.mark.parametrize(
    "name, text",
    [
        ("--manifest", "required"),
        ("--dedup", "off"),
        ("--no_progress", "off"),  # off unless given, though it clears a True field
        ("--split", "none"),
        ("--feature", "none"),
        ("--max_error_rate", "0.01"),
        ("--max_decode_mb", "1024"),
        ("--channels", "3"),
    ],
)
def test_the_default_is_said_as_a_person_reads_it(name, text):
    assert default_text(BY_NAME[name]) == text


def test_a_default_given_in_words_is_said_in_them():
    option = Option("--shards", TEXT, None, "how many", said="by size")
    assert default_text(option) == "by size"


def test_the_synopsis_is_argparse_s():
    assert synopsis(BY_NAME["--manifest"]) == "--manifest M [M ...]"
    assert synopsis(BY_NAME["--channels"]) == "--channels 1|3"
    assert synopsis(BY_NAME["--no_progress"]) == "--no_progress"


def test_help_drops_markdown_and_escapes_argparse_s_percent_signs():
    option = Option("--rate", FLOAT, 0.5, "a `rate` in %", value="R")
    assert help_text(option) == "a rate in %% (default: 0.5)"
    assert help_text(BY_NAME["--manifest"]).endswith("(required)")


def test_a_failure_names_the_flag_and_none_is_not_given():
    option = Option("--size", FLOAT, None, "a size", POSITIVE, value="N")
    assert failure(option, -1.0) == "--size must be positive"
    assert failure(option, None) is None and failure(option, 2.0) is None
    picked = Option("--colour", choice(("red", "blue")), "red", "a colour")
    assert failure(picked, "green") == "--colour must be one of red, blue"


def test_every_default_passes_its_own_check():
    """A default its option's check refuses would refuse every run that leaves it out."""
    for option in FLAGS:
        if not option.required:
            assert failure(option, option.default) is None, option.name
