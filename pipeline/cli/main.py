"""`tfrecord-pipeline` command line: user mistakes and faults as one line each, with exit
statuses a scheduler can act on; bugs as tracebacks.

The read-side commands import their modules when they run: a conversion, which often runs on
little data, does not load protobuf's classes, Pillow's drawing or the HTML report.
"""

import argparse
import logging
import os
import sys

from tfrecord_pipeline.cli import logs
from tfrecord_pipeline.cli.faults import as_fault, bug_reported, missing_credentials, report_fault
from tfrecord_pipeline.cli.help import OVERVIEW, convert_help
from tfrecord_pipeline.cli.hints import closing_lines
from tfrecord_pipeline.cli.job import counters, job_line
from tfrecord_pipeline.cli.summary import format_counters, format_summary
from tfrecord_pipeline.config.arguments import UserErrorParser, parse_args
from tfrecord_pipeline.config.conversion import Conversion, prepare
from tfrecord_pipeline.dataset import claims, publish, run_keys
from tfrecord_pipeline.dataset.commit import read_info, unmade_on_mistake
from tfrecord_pipeline.runners.convert import convert_prepared
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.local.pool import fork_workers
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.version import __version__

# The exit statuses, as docs/guarantees.md documents them.
EXIT_OK = 0  # published (convert), no problem found (verify), file written (preview, stats)
EXIT_FAILED_GATES = 1  # converted but not published (quality gates); verify found problems
EXIT_USER_ERROR = 2  # a usage or input mistake: a bad flag, manifest or --output
EXIT_FAULT = 3  # a fault the run could not survive (full disk, a writer killed, ...): rerun
EXIT_SUPERSEDED = 4  # another run published a version of the same dataset first
EXIT_BUG = 70  # a bug, its traceback printed (sysexits' EX_SOFTWARE): never 1, the gates' status
EXIT_INTERRUPTED = 130  # as a shell reports a command stopped by Ctrl-C (128 + SIGINT)


def _finish(info, folder: str, image_root: str | None) -> int:
    print(format_summary(info, folder))
    for line in closing_lines(info, folder, image_root, os.getcwd()):
        print(line, file=sys.stderr)
    return EXIT_FAILED_GATES if info.failures else EXIT_OK


def _convert(argv: list[str]) -> int:
    if asked := convert_help(argv):
        print(asked)
        return EXIT_OK
    conversion = prepare(*parse_args(argv))

    def run() -> int:
        if conversion.runner.dataflow:
            return _on_dataflow(conversion)
        return _finish(*convert_prepared(conversion), conversion.options.image_root)

    return _faults_reported(run, conversion.options.debug)


def _faults_reported(command, debug: bool) -> int:
    """`command`'s exit status; a fault it raises printed as one line, with its status."""
    try:
        return command()
    except Exception as error:  # noqa: BLE001 - re-raised unless it is a fault
        fault = as_fault(error)
        if fault is None:
            raise
        line = report_fault(fault, error, debug)
        print(f"tfrecord-pipeline: failed: {line}", file=sys.stderr)
        return EXIT_SUPERSEDED if isinstance(fault, publish.SupersededError) else EXIT_FAULT


def _on_dataflow(conversion: Conversion) -> int:
    """Submit the job, print its console URL and the version it publishes; --wait: report."""
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRuntimeException

    from tfrecord_pipeline.runners.beam_pipeline import launch

    target = publish.start(conversion.options.output)
    if repeated := run_keys.published_before(target, conversion.options.run_key):  # retried
        return _finish(*repeated, conversion.options.image_root)
    with unmade_on_mistake(target), claims.claimed(target.root, target.version, detached=True):
        result = launch(conversion, target)
    print(job_line(result, conversion.beam_args))
    if not conversion.options.wait or not hasattr(result, "job_id"):
        print(f"the job publishes {target.folder}")
        return EXIT_OK
    try:
        state = result.wait_until_finish()
    except DataflowRuntimeException as error:
        print(f"tfrecord-pipeline: the Dataflow job failed: {error}", file=sys.stderr)
        return EXIT_FAILED_GATES
    print(f"job {state}: {format_counters(counters(result))}")
    return _finish(read_info(target.folder), target.folder, conversion.options.image_root)


def _there(path: str) -> str:
    """A dataset path, once found to be there (a local one: `gs://` has no folders)."""
    if not fileio.is_remote(path) and not os.path.exists(path):
        raise UserError(fileio.not_there(path, folder=True))
    return path


def _parser(command: str) -> argparse.ArgumentParser:
    parser = UserErrorParser(prog=f"tfrecord-pipeline {command}", allow_abbrev=False)
    parser.add_argument(
        "output",
        type=_there,
        help="a dataset root, whose published version is read, or a version folder (local or "
        "gs://)",
    )
    return parser


def _count(text: str) -> int:
    """A count of images to show: 0 or fewer would show none, or silently the default."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}")
    return int(text)


def _located(path: str, problem: str) -> str:
    """A problem `verify` found, led by the path it was given unless it already begins with
    it (the root's own problems name it: `ROOT holds no published dataset...`, `ROOT/LATEST
    is ...`); a shard's name that merely starts like the path (`train-...` in `train/`) is led."""
    root = path.rstrip("/")
    named = problem.startswith((f"{root} ", f"{root}/", f"{root},"))
    return problem if named else f"{path}: {problem}"


def _verify(argv: list[str]) -> int:
    from tfrecord_pipeline.read.verify import DECODE_MODES, verify

    parser = _parser("verify")
    parser.add_argument("--decode", choices=DECODE_MODES, default="sample")
    args = parser.parse_args(argv)
    records, problems = verify(args.output, args.decode)
    for problem in problems:
        print(_located(args.output, problem), file=sys.stderr)
    if problems:
        return EXIT_FAILED_GATES
    print(f"{args.output}: ok, {records:,} records verified")
    return EXIT_OK


def _preview(argv: list[str]) -> int:
    from tfrecord_pipeline.read.preview import preview

    parser = _parser("preview")
    parser.add_argument("--split", default="train")
    parser.add_argument("-o", "--out", required=True, help="the image: .png, .jpg, .jpeg or .webp")
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--per_class", type=_count, help="N images of each class, a row each")
    choice.add_argument("--random", type=_count, help="N random images")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    per_class = args.per_class or (None if args.random else 4)
    shown = preview(args.output, args.split, args.out, per_class, args.random, args.seed)
    print(f"{args.out}: {shown} images from {args.output} ({args.split})")
    return EXIT_OK


def _stats(argv: list[str]) -> int:
    from tfrecord_pipeline.read.stats import stats

    parser = _parser("stats")
    parser.add_argument("-o", "--out", required=True, help="the report: .html or .htm")
    args = parser.parse_args(argv)
    stats(args.output, args.out)
    print(f"{args.out}: report on {args.output}")
    return EXIT_OK


def _rollback(argv: list[str]) -> int:
    from tfrecord_pipeline.dataset.rollback import rollback

    parser = UserErrorParser(prog="tfrecord-pipeline rollback", allow_abbrev=False)
    parser.add_argument("root", help="a dataset root (local or gs://)")
    parser.add_argument(
        "--to",
        required=True,
        help="the version to publish: its name, its number, or 'previous' (the newest version "
        "numbered before the published one)",
    )
    args = parser.parse_args(argv)

    def run() -> int:
        print(f"{args.root}: {rollback(args.root, args.to).said()}")
        return EXIT_OK

    return _faults_reported(run, debug=False)  # a fault's traceback goes to a log file


COMMANDS = {
    "convert": _convert,
    "verify": _verify,
    "preview": _preview,
    "stats": _stats,
    "rollback": _rollback,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    logs.configure()
    if not argv or argv[0] in ("-h", "--help"):
        print(OVERVIEW)
        return EXIT_OK if argv else EXIT_USER_ERROR
    if argv[0] == "--version":
        print(f"tfrecord-pipeline {__version__}")
        return EXIT_OK
    command, rest = argv[0], argv[1:]
    try:
        if command in COMMANDS:
            return COMMANDS[command](rest)
        raise UserError(f"unknown command {command!r}; try 'tfrecord-pipeline --help'")
    except Exception as error:  # noqa: BLE001 - re-raised unless it is the user's to mend
        # Missing Google credentials are the user's to set up, not a fault or a bug.
        line = str(error) if isinstance(error, UserError) else missing_credentials(error)
        if line is None:
            raise
        print(f"tfrecord-pipeline: error: {line}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:  # Ctrl-C: the output is left uncommitted, as after any failure
        print("tfrecord-pipeline: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def entry_point() -> None:
    """The `tfrecord-pipeline` command: `main` in a process whose shard writers are forks of
    it (transforms/local/pool.py) and whose OpenBLAS keeps to one thread (NumPy starts one a
    core, which spin unused: 65 ms of CPU on 2 cores), then, when no Beam or TensorFlow was
    loaded, an exit without the interpreter's teardown.

    Freeing every module and object of a finished conversion takes as long as converting a few
    hundred images, and would only free memory: every file is closed, every child reaped, the
    progress folder removed. Beam and TensorFlow keep exit handlers of their own."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    fork_workers()
    code = bug_reported(main, EXIT_BUG)
    if any(library in sys.modules for library in ("apache_beam", "tensorflow")):
        sys.exit(code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry_point()
