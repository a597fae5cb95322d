"""The `convert` command's argv: the conversion's own flags, made from their declarations
(FLAGS) into ConvertOptions, and every other flag passed to Beam untouched (once Beam knows it)."""

import argparse
import difflib
import functools
from collections.abc import Iterable

from tfrecord_pipeline.config.flags import FLAGS, in_group
from tfrecord_pipeline.config.option import GROUPS, help_text
from tfrecord_pipeline.config.options import ConvertOptions
from tfrecord_pipeline.transforms.errors import UserError

OUR_FLAGS = tuple(flag.name for flag in FLAGS)
USAGE = "tfrecord-pipeline convert --manifest M --output DIR [flags] [Beam flags]"
ALL_FLAGS = "tfrecord-pipeline convert --help-all"
BEAM_FLAGS = (
    "Beam pipeline flags: any flag not listed above is Beam's (--runner, --project, --region, "
    "--temp_location, --setup_file, --direct_num_workers, ...) and is passed to Beam as it is "
    "given. With one, the conversion runs as a Beam pipeline on the runner --runner names "
    "(Beam's DirectRunner when none does); without, on the local runner (--processes). A flag "
    "that neither this command nor Beam knows is refused, exit status 2."
)


class UserErrorParser(argparse.ArgumentParser):
    """argparse that raises UserError (one line from the CLI) instead of exiting; a flag it
    does not know is said as such, with the flag it resembles, before any other complaint (a
    mistyped flag otherwise reads as a missing one: `-o` for `--output`)."""

    def error(self, message):
        raise UserError(message)

    def parse_args(self, args=None, namespace=None):
        # Each flag by its longest name, which a suggestion names; its short names accepted.
        names = [action.option_strings for action in self._actions if action.option_strings]
        known, short = [max(each, key=len) for each in names], [n for each in names for n in each]
        every = f"{self.prog} --help"
        try:
            parsed, rest = self.parse_known_args(args, namespace)
        except UserError:
            refuse_unknown_flags(args or [], known, every=every, also=short)
            raise
        refuse_unknown_flags(rest, known, every=every, also=short)
        if rest:
            self.error(f"unexpected argument {rest[0]!r}; its flags: {self.prog} --help")
        return parsed


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
    for group, about in GROUPS.items():
        section = parser.add_argument_group(group, about)
        for option in in_group(group):
            value = {"metavar": option.value} if option.value else {}
            section.add_argument(
                option.name,
                help=help_text(option),
                dest=option.dest,
                required=option.required,
                **value,
                **option.kind.parse,
            )
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
        raise unknown_flag(unknown, OUR_FLAGS, beam_names)


def _flag_like(given: str) -> bool:
    """An argument written as a flag: a dash and a name, not a negative number."""
    try:
        float(given)
    except ValueError:
        return given.startswith("-") and given != "-"
    return False


def refuse_unknown_flags(
    argv: list[str], *known: Iterable[str], every: str, also: Iterable[str] = ()
) -> None:
    """UserError for the first flag of `argv` that none of `known` (nor `also`, names never
    suggested) holds: see `unknown_flag`."""
    names = {*also, *(name for flags in known for name in flags)}
    flags = [given.split("=", 1)[0] for given in argv if _flag_like(given)]
    if unknown := [flag for flag in flags if flag not in names]:
        raise unknown_flag(unknown, *known, every=every)


def _plain(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_").lower()


def closest(name: str, *known: Iterable[str]) -> str | None:
    """The flag `name` was most likely meant to be: one the same but for dashes, underscores
    and case, else the only one it begins or that begins it (`-o`, `--out`, `--output_dir`:
    `--output`), else the nearest by spelling if one is near; the flags of the first of `known`
    before the next's. None when none is near."""
    plain = _plain(name)
    tables = [{_plain(flag): flag for flag in flags} for flags in known]
    for table in tables:
        if plain in table:
            return table[plain]
    for table in tables:
        begun = [f for key, f in table.items() if key.startswith(plain) or plain.startswith(key)]
        if plain and len(begun) == 1:
            return begun[0]
    for table in tables:
        if near := difflib.get_close_matches(plain, table, n=1, cutoff=0.8):
            return table[near[0]]
    return None


def unknown_flag(unknown: list[str], *known: Iterable[str], every: str = ALL_FLAGS) -> UserError:
    """The one line for arguments no parser knows: the first unknown flag, and the flag of
    `known` it was likely meant to be, else where `every` flag is listed."""
    flags = [given for given in unknown if _flag_like(given)]
    if not flags:
        return UserError(f"unexpected argument {unknown[0]!r}; every flag: {every}")
    name = flags[0].split("=", 1)[0]
    if name == "--version":
        return UserError("unknown flag --version: the version is 'tfrecord-pipeline --version'")
    meant = closest(name, *known)
    hint = f"did you mean {meant}?" if meant else f"every flag: {every}"
    return UserError(f"unknown flag {name}: {hint}")


def parse_args(argv: list[str]) -> tuple[ConvertOptions, list[str]]:
    """Split argv into the conversion's options and Beam's pipeline flags, Beam's checked by
    name; their values are checked once, by `prepare` (pipeline/config/conversion.py)."""
    try:
        known, beam_args = _parser().parse_known_args(argv)
    except UserError:
        # A mistyped flag of ours reads as a missing one (--ouput for --output): say the typo.
        flags = [given.split("=", 1)[0] for given in argv if _flag_like(given)]
        if any(flag not in OUR_FLAGS for flag in flags):
            refuse_unknown_flags(argv, OUR_FLAGS, _beam_parser()[1], every=ALL_FLAGS)
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
