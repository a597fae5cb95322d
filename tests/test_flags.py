"""pipeline/config/flags.py: a flag's synopsis and default in words, as --help-all and the docs'
table show them (both checked whole: test_cli_help.py and the docs' test)."""

import pytest

from tfrecord_pipeline.config.flags import FLAGS, SWITCH, Flag, default_text, help_text, synopsis

BY_NAME = {flag.name: flag for flag in FLAGS}


@pytest.mark.parametrize(
    "name, value, text",
    [
        ("--manifest", [], "required"),
        ("--dedup", False, "off"),
        ("--no_progress", True, "off"),  # off unless given, though it clears a True field
        ("--split", None, "none"),
        ("--feature", [], "none"),
        ("--max_error_rate", 0.01, "0.01"),
        ("--max_decode_mb", 1024.0, "1024"),
        ("--channels", 3, "3"),
    ],
)
def test_the_default_is_said_as_a_person_reads_it(name, value, text):
    flag = BY_NAME[name]
    assert default_text(flag, {flag.dest: value}) == text


def test_a_default_given_in_words_is_said_in_them():
    flag = Flag("--shards", "N", {}, "how many", default="by size")
    assert default_text(flag, {"shards": None}) == "by size"


def test_the_synopsis_is_argparse_s():
    assert synopsis(BY_NAME["--manifest"]) == "--manifest M [M ...]"
    assert synopsis(BY_NAME["--channels"]) == "--channels 1|3"
    assert synopsis(BY_NAME["--no_progress"]) == "--no_progress"


def test_help_drops_markdown_and_escapes_argparse_s_percent_signs():
    flag = Flag("--rate", "R", SWITCH, "a `rate` in %", "")
    assert help_text(flag, {"rate": 0.5}) == "a rate in %% (default: 0.5)"
    assert help_text(BY_NAME["--manifest"], {"manifest": []}).endswith("(required)")
