"""Running a conversion to the end: the Python API, and the choice between the two runners.

Without Beam flags a conversion runs on this machine without Beam (pipeline/local.py); with any
Beam flag, or a test pipeline, it runs as the Beam pipeline (pipeline/beam_pipeline.py), which
is imported only then. Both write the same bytes.
"""

import contextlib

from pipeline.commit import cleaned_up_on_failure, read_info
from pipeline.local import convert_here
from pipeline.metadata import DatasetInfo
from pipeline.options import ConvertOptions, parse_args
from pipeline.progress import ProgressBar, progress_folder
from pipeline.runners import resolve


def run(argv: list[str] | None = None, test_pipeline=None) -> DatasetInfo:
    """Parse flags, convert, and return the dataset's metadata (committed or not)."""
    options, beam_args = parse_args(list(argv or []))
    return convert(options, beam_args, test_pipeline)


def convert(options: ConvertOptions, beam_args=(), test_pipeline=None) -> DatasetInfo:
    """Run one conversion to the end and return its metadata. `beam_args` are Beam pipeline
    flags; `test_pipeline` a Beam TestPipeline to build the conversion in. A failed run leaves
    the output uncommitted and its temporary files removed where the failure allows."""
    beam_args = list(beam_args)
    runner = resolve(beam_args)
    options.validate_values()
    with cleaned_up_on_failure(options.output):
        if not beam_args and test_pipeline is None:
            return convert_here(options)
        from pipeline.beam_pipeline import launch

        with contextlib.ExitStack() as stack:
            progress_dir = None
            if options.progress and test_pipeline is None and runner.here:
                progress_dir = progress_folder(stack)
                stack.enter_context(ProgressBar(progress_dir))
            launch(options, beam_args, test_pipeline, progress_dir).wait_until_finish()
        return read_info(options.output)
