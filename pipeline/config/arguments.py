"""The `convert` command's argv: the conversion's own flags, made from FLAGS into
ConvertOptions, and every other flag passed to Beam untouched (once Beam knows it)."""

import argparse
import difflib
import functools
from collections.abc import Iterable

from tfrecord_pipeline.config.flags import FLAGS, GROUPS, help_text, in_group
from tfrecord_pipeline.config.options import ConvertOptions, option_defaults
from tfrecord_pipeline.transforms.errors import UserError

USAGE = "tfrecord-pipeline convert --manifest M [M ...] --output DIR [flags] [Beam flags]"
ALL_FLAGS = "tfrecord-pipeline convert --help-all"
BEAM_FLAGS = (
    "Beam pipeline flags: any flag not listed above is Beam's (--runner, --project, --region, "
    "--temp_location, --setup_file, --direct_num_workers, ...) and is passed to Beam as it is "
    "given. With one, the conversion runs as a Beam pipeline on the runner --runner names "
    "(Beam's DirectRunner when none does); without, on the local runner (--processes). A flag "
    "that neither this command nor Beam knows is refused, exit status 2."
)


class UserErrorParser(argparse.ArgumentParser):
    """argparse that raises UserError (one line from the CLI) instead of exiting."""

    def error(self, message):
        raise UserError(message)


def _parser() -> argparse.ArgumentParser:
    """The parser of `convert`'s flags, made from FLAGS a group at a time; absent flags take
    ConvertOptions' defaults, which its help (`--help-all`) shows. The command line answers
    --help itself (pipeline/cli/help.py)."""
    parser = UserErrorParser(
        prog="tfrecord-pipeline convert",
        usage=USAGE,
        description="Turn image/label manifests into sharded TFRecord files. Every flag, by group:",
        epilog=BEAM_FLAGS,
        allow_abbrev=False,
        add_help=False,
        argument_default=argparse.SUPPRESS,
    )
    defaults = option_defaults()
    for group, about in GROUPS.items():
        section = parser.add_argument_group(group, about)
        for flag in in_group(group):
            value = {"metavar": flag.value} if flag.value else {}
            section.add_argument(flag.name, help=help_text(flag, defaults), **value, **flag.parse)
    return parser


def full_help() -> str:
    """`convert --help-all`: every flag by group, with its meaning and default."""
    return _parser().format_help()


@functools.cache
def _beam_parser() -> tuple[argparse.ArgumentParser, tuple[str, ...]]:
    """The parser Beam itself uses, with every option Beam declares, and those options' names.
    Beam is imported only now: it takes seconds, and a local run never needs it."""
    from apache_beam.options import pipeline_options

    names = []

    class Recording(pipeline_options._BeamArgumentParser):
        def add_argument(self, *flags, **keywords):
            names.extend(flag for flag in flags if flag.startswith("--"))
            return super().add_argument(*flags, **keywords)

        def error(self, message):  # argparse's: its usage (150 lines of Beam flags), then exit
            raise UserError(message)

    parser = Recording(allow_abbrev=False, add_help=False)
    for options_class in pipeline_options.PipelineOptions.__subclasses__():
        options_class._add_argparse_args(parser)
    return parser, tuple(names)


def _refuse_unknown(beam_args: list[str]) -> None:
    """UserError for the first of `beam_args` Beam does not know: Beam itself drops such a
    flag with only a log line, and a typo must stop the job."""
    parser, beam_names = _beam_parser()
    unknown = parser.parse_known_args(beam_args)[1]
    if unknown:
        raise unknown_flag(unknown, beam_names)


def _plain(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_").lower()


def closest(name: str, *known: Iterable[str]) -> str | None:
    """The flag `name` was most likely meant to be: one the same but for dashes, underscores
    and case, else the nearest by spelling if one is near; the flags of the first of `known`
    before the next's. None when none is near."""
    plain = _plain(name)
    tables = [{_plain(flag): flag for flag in flags} for flags in known]
    for table in tables:
        if plain in table:
            return table[plain]
    for table in tables:
        if near := difflib.get_close_matches(plain, table, n=1, cutoff=0.8):
            return table[near[0]]
    return None


def unknown_flag(unknown: list[str], beam_names: list[str]) -> UserError:
    """The one line for arguments neither the conversion nor Beam knows: the first unknown
    flag, and the flag it was likely meant to be."""
    flags = [given for given in unknown if given.startswith("-")]
    if not flags:
        return UserError(f"unexpected argument {unknown[0]!r}; every flag: {ALL_FLAGS}")
    name = flags[0].split("=", 1)[0]
    meant = closest(name, [flag.name for flag in FLAGS], beam_names)
    hint = f"did you mean {meant}?" if meant else f"every flag: {ALL_FLAGS}"
    return UserError(f"unknown flag {name}: {hint}")


def parse_args(argv: list[str]) -> tuple[ConvertOptions, list[str]]:
    """Split argv into the conversion's options and Beam's pipeline flags, Beam's checked by
    name; their values are checked once, by `prepare` (pipeline/config/conversion.py)."""
    try:
        known, beam_args = _parser().parse_known_args(argv)
    except UserError:
        # A mistyped flag of ours reads as a missing one (--ouput for --output): say the typo.
        ours = {flag.name for flag in FLAGS}
        flags = [given.split("=", 1)[0] for given in argv if given.startswith("--")]
        if others := [flag for flag in flags if flag not in ours]:
            beam_names = _beam_parser()[1]
            if unknown := [flag for flag in others if flag not in beam_names]:
                raise unknown_flag(unknown, beam_names) from None
        raise
    if beam_args:
        _refuse_unknown(beam_args)
    options = ConvertOptions(**vars(known))
    if options.processes and beam_args:
        raise UserError(
            "--processes is for local runs without Beam flags; Beam runners start their own "
            "workers (on this machine: --direct_num_workers)"
        )
    return options, beam_args
