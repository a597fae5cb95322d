"""The `convert` command's argv: the conversion's own flags, made from FLAGS into
ConvertOptions, and every other flag passed to Beam untouched (once Beam knows it)."""

import argparse

from tfrecord_pipeline.config.flags import FLAGS, help_text
from tfrecord_pipeline.config.options import ConvertOptions, option_defaults
from tfrecord_pipeline.transforms.errors import UserError


class UserErrorParser(argparse.ArgumentParser):
    """argparse that raises UserError (one line from the CLI) instead of exiting."""

    def error(self, message):
        raise UserError(message)


def _parser() -> argparse.ArgumentParser:
    """The parser of `convert`'s flags, made from FLAGS; absent flags take ConvertOptions'
    defaults, which --help shows."""
    parser = UserErrorParser(
        prog="tfrecord-pipeline convert",
        description="Turn image/label manifests into sharded TFRecord files.",
        epilog="Any other flag is a Beam pipeline flag (--runner, --project, ...) and runs the "
        "conversion as a Beam pipeline; a flag neither knows is refused. The README's Usage "
        "and Runners sections say more.",
        allow_abbrev=False,
        argument_default=argparse.SUPPRESS,
    )
    defaults = option_defaults()
    for flag in FLAGS:
        value = {"metavar": flag.value} if flag.value else {}
        parser.add_argument(flag.name, help=help_text(flag, defaults), **value, **flag.parse)
    return parser


def _beam_options():
    """Beam's options module, imported only when there are Beam flags: Beam takes seconds to
    import, and a local run without Beam flags never needs it."""
    from apache_beam.options import pipeline_options

    return pipeline_options


def _check_beam_flags(beam_args: list[str]) -> None:
    """Beam drops flags it does not know with only a log line; a typo must stop the job."""
    beam_options = _beam_options()
    parser = beam_options._BeamArgumentParser(allow_abbrev=False)  # the parser Beam itself uses
    for options_class in beam_options.PipelineOptions.__subclasses__():
        options_class._add_argparse_args(parser)
    _, unknown = parser.parse_known_args(beam_args)
    if unknown:
        raise UserError(f"unknown flag(s): {' '.join(unknown)}")


def parse_args(argv: list[str]) -> tuple[ConvertOptions, list[str]]:
    """Split argv into the conversion's options and Beam's pipeline flags, Beam's checked by
    name; their values are checked once, by `prepare` (pipeline/config/conversion.py)."""
    known, beam_args = _parser().parse_known_args(argv)
    if beam_args:
        _check_beam_flags(beam_args)
    options = ConvertOptions(**vars(known))
    if options.processes and beam_args:
        raise UserError(
            "--processes is for local runs without Beam flags; Beam runners start their own "
            "workers (on this machine: --direct_num_workers)"
        )
    return options, beam_args
