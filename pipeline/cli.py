"""`tfrecord-pipeline` command line: user mistakes as one line and exit 2, bugs as tracebacks."""

import logging
import sys

from pipeline.convert import convert
from pipeline.options import parse_args
from pipeline.progress import format_summary
from transforms.errors import UserError

USAGE = """usage: tfrecord-pipeline convert --manifest M [M ...] --output DIR [options] [Beam flags]

commands:
  convert   turn image/label manifests into sharded TFRecord files
run 'tfrecord-pipeline convert --help' for the options"""

EXIT_FAILED_GATES = 1
EXIT_USER_ERROR = 2


def _convert(argv: list[str]) -> int:
    options, beam_args = parse_args(argv)
    info = convert(options, beam_args)
    print(format_summary(info, options.output))
    for failure in info.failures:
        print(f"tfrecord-pipeline: dataset not committed: {failure}", file=sys.stderr)
    return EXIT_FAILED_GATES if info.failures else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Local worker processes forward start-up chatter (unused Beam flags, no staging folder)
    # as warnings; it says nothing about the conversion.
    logging.getLogger("apache_beam.runners.portability.local_job_service").setLevel(logging.ERROR)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else EXIT_USER_ERROR
    command, rest = argv[0], argv[1:]
    try:
        if command == "convert":
            return _convert(rest)
        raise UserError(f"unknown command {command!r}; try 'tfrecord-pipeline --help'")
    except UserError as error:
        print(f"tfrecord-pipeline: error: {error}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
