"""pipeline/config/arguments.py: `convert`'s argv split into the conversion's options and Beam's
flags, Beam's checked by name, and every mistake a UserError (the command's one line and exit 2,
end to end: test_cli.py)."""

import pytest

from tfrecord_pipeline.config.arguments import parse_args
from tfrecord_pipeline.config.flags import FLAGS
from tfrecord_pipeline.config.values import FLOAT
from tfrecord_pipeline.transforms.errors import UserError

NEEDED = ["--manifest", "a.csv", "b.jsonl", "--output", "out"]


def test_the_conversion_s_flags_become_options_and_the_rest_go_to_beam_in_order():
    beam = ["--runner", "DirectRunner", "--direct_num_workers=2"]
    options, beam_args = parse_args([*NEEDED, "--num_shards", "4", *beam, "--channels=1"])
    assert (options.manifest, options.output, options.num_shards) == (
        ["a.csv", "b.jsonl"],
        "out",
        "4",
    )
    assert options.channels == 1 and beam_args == beam
    options, beam_args = parse_args(NEEDED)
    assert options.channels == 3 and options.progress and beam_args == []


@pytest.mark.parametrize(
    "switch, value",
    [
        (["--dedup"], True),
        (["--dedup=true"], True),
        (["--dedup=False"], False),
        (["--dedup=0"], False),
    ],
)
def test_a_switch_is_given_alone_or_as_a_template_launcher_gives_it(switch, value):
    assert parse_args([*NEEDED, *switch])[0].dedup is value


@pytest.mark.parametrize(
    "argv, says",
    [
        ([*NEEDED, "--runer", "DirectRunner"], "unknown flag --runer: did you mean --runner?"),
        ([*NEEDED, "--num_shard", "4"], "unknown flag --num_shard: did you mean --num_shards?"),
        ([*NEEDED, "--dedup=maybe"], "expected true or false, got 'maybe'"),
        ([*NEEDED, "--channels", "three"], "invalid int value: 'three'"),
        (["--output", "out"], "the following arguments are required: --manifest"),
        ([*NEEDED, "--processes", "2", "--runner", "DirectRunner"], "--processes is for local"),
    ],
)
def test_each_mistake_is_a_user_error(argv, says):
    with pytest.raises(UserError) as raised:
        parse_args(argv)
    assert says in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("flag", [flag.name for flag in FLAGS if flag.kind is FLOAT])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "x"])
def test_a_number_flag_takes_only_a_finite_number(flag, value):
    """`--max_metadata_mb nan` (and --max_decode_mb, --max_file_mb) got past the parser and
    ended in a traceback where the size in bytes was made."""
    with pytest.raises(UserError, match=f"argument {flag}: expected a finite number"):
        parse_args([*NEEDED, f"{flag}={value}"])


def test_manifest_given_again_adds_to_the_manifests_rather_than_replacing_them():
    argv = ["--manifest", "train.tar", "--manifest", "val.tar", "b.csv", "--output", "out"]
    assert parse_args(argv)[0].manifest == ["train.tar", "val.tar", "b.csv"]
