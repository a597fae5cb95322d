"""Running a conversion to the end: the Python API, and the runner `prepare` chose.

Without Beam flags a conversion runs on this machine without Beam (pipeline/runners/local.py); with
any Beam flag, or a test pipeline, it runs as the Beam pipeline
(pipeline/runners/beam_pipeline.py), which is imported only then. Both write the same bytes.
"""

from typing import NamedTuple

from tfrecord_pipeline.config.arguments import parse_args
from tfrecord_pipeline.config.conversion import Conversion, prepare
from tfrecord_pipeline.config.options import ConvertOptions
from tfrecord_pipeline.config.runner_choice import LOCAL
from tfrecord_pipeline.dataset import publish
from tfrecord_pipeline.dataset.claims import claimed
from tfrecord_pipeline.dataset.commit import cleaned_up_on_failure, read_info
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.dataset.run_keys import published_before
from tfrecord_pipeline.runners.local import convert_here
from tfrecord_pipeline.transforms.errors import UserError, beams_original
from tfrecord_pipeline.transforms.progress import UNWATCHED
from tfrecord_pipeline.transforms.progress_bar import ProgressBar


class Converted(NamedTuple):
    """A finished run: its version's metadata and folder. The version is published unless
    `info.failures` says why not (its files stay for a look until a later run publishes)."""

    info: DatasetInfo
    folder: str


def run(argv: list[str] | None = None, test_pipeline=None) -> Converted:
    """Parse flags, convert, and return the new version's metadata and folder."""
    options, beam_args = parse_args(list(argv or []))
    return convert(options, beam_args, test_pipeline)


def convert(options: ConvertOptions, beam_args=(), test_pipeline=None) -> Converted:
    """Run one conversion into a new version of the dataset at `options.output`, publish it
    if it passes its gates, and return it. `beam_args` are Beam pipeline flags;
    `test_pipeline` a Beam TestPipeline to build the conversion in. A failed run leaves the
    published version as it was and deletes its own files where the failure allows."""
    return convert_prepared(prepare(options, beam_args, test_pipeline), test_pipeline)


def convert_prepared(conversion: Conversion, test_pipeline=None) -> Converted:
    """`convert`, its options checked and its runner decided (pipeline/config/conversion.py
    `prepare`, given the same `test_pipeline`). A run whose `run_key` a kept version was
    published with returns that version, having read no manifest or image and written nothing
    (pipeline/dataset/run_keys.py)."""
    target = publish.start(conversion.options.output)
    if repeated := published_before(target, conversion.options.run_key):
        return Converted(*repeated)
    # The one place a run gets a bar: on this machine, for a person (not a test pipeline).
    shown = conversion.options.progress and conversion.runner.here and test_pipeline is None
    watch = ProgressBar() if shown else UNWATCHED
    with cleaned_up_on_failure(target), claimed(target.root, target.version):
        if conversion.runner == LOCAL:
            return Converted(convert_here(conversion, target, watch), target.folder)
        from tfrecord_pipeline.runners.beam_pipeline import launch

        with watch as progress:
            try:
                launch(conversion, target, test_pipeline, progress).wait_until_finish()
            except UserError as error:  # a step's (the plan's: labels that mix kinds)
                raise beams_original(error) from None
        return Converted(read_info(target.folder), target.folder)
