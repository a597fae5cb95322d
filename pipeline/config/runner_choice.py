"""Which runner a conversion's Beam flags choose, decided once, the way Beam decides it.

Beam turns `--runner` into a runner class (`direct`, `directrunner` and `DirectRunner` are one
class; a dotted path names any PipelineRunner subclass) and checks the flags against it
(PipelineOptionsValidator). The conversion asks that class three questions. Does the pipeline
run on this machine (Beam's own list of local runners, or a PortableRunner with an embedded job
server)? Then a progress bar runs. Is it Dataflow? Then the command submits the job and prints
its URL; every other runner runs the job to its end and prints the summary. How many of its
worker processes share a machine's cores? Each shard writer sizes its threads from its share.
(`--processes` is the local runner's alone: with Beam flags it is refused.)

The embedded job server (`--job_endpoint embed`) runs the job on Beam's FnApiRunner with one
SDK harness, whatever `--direct_num_workers` says (Beam 2.77), and can start that harness on
threads here (LOOPBACK), as a process (LOOPBACK with the experiment
`use_loopback_process_worker`), from a worker pool (EXTERNAL) or in Docker; not as a PROCESS
environment, which only Beam's Java job servers start.
"""

import functools
import shutil
import subprocess
import sys
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.write.threads import available_cores


class Runner(NamedTuple):
    name: str  # the runner class's name; "" for the local runner
    here: bool  # the pipeline runs on this machine
    dataflow: bool  # a DataflowRunner (or a subclass): the job runs on Google Cloud
    # One SDK worker runs every step: this process, or the embedded job server's one harness
    one_process: bool
    sdk_processes: int = 1  # Beam worker processes sharing a machine; 0: one per core


LOCAL = Runner("", here=True, dataflow=False, one_process=True)  # no Beam flags: no Beam


def resolve(beam_args=()) -> Runner:
    """The runner `beam_args` choose, their values checked as Beam checks them; raises
    UserError for an unknown runner or flags Beam would refuse. No Beam flags: the local
    runner, and Beam stays unimported."""
    return _resolve(tuple(beam_args)) if beam_args else LOCAL


@functools.cache
def _resolve(beam_args: tuple[str, ...]) -> Runner:
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    options = PipelineOptions(list(beam_args))
    runner = _create(options.view_as(StandardOptions).runner or StandardOptions.DEFAULT_RUNNER)
    _validate(runner, options)
    return describe(runner, options)


def _create(name: str):
    """The runner `--runner name` names, as Beam's Pipeline creates it."""
    from apache_beam.options.pipeline_options import StandardOptions
    from apache_beam.runners.runner import PipelineRunner, create_runner

    try:
        runner = create_runner(name)
    except ImportError as error:  # a runner whose extra is not installed, or no such module
        raise UserError(f"--runner {name}: {error}") from None
    except (ValueError, AttributeError, TypeError):  # no such name, or not a class
        runner = None
    if not isinstance(runner, PipelineRunner):
        known = ", ".join(StandardOptions.KNOWN_RUNNER_NAMES)
        raise UserError(
            f"--runner {name}: not a Beam runner; use one of {known}, "
            "or the dotted path of a PipelineRunner subclass"
        )
    if _is_a(runner, "apache_beam.runners.dataflow.dataflow_runner", "DataflowRunner"):
        _dataflow_client(name)
    if _is_a(runner, "apache_beam.runners.direct.direct_runner", "BundleBasedDirectRunner"):
        # Beam 2.77's BundleBasedDirectRunner sends a step's tagged outputs to its main output,
        # or drops them, depending on the interpreter's hash seed.
        raise UserError(
            f"--runner {name}: the bundle-based DirectRunner mixes up the shard writer's "
            "outputs; use --runner DirectRunner"
        )
    return runner


# What `pip install tfrecord-pipeline` leaves out: Beam's [gcp] extra, which submitting needs.
DATAFLOW_EXTRA = "pip install 'tfrecord-pipeline[dataflow]'"


def _dataflow_client(name: str) -> None:
    """Beam's Dataflow client, imported now as DataflowRunner imports it when it submits: without
    the dataflow extra its module loads, and the job would fail only then, with a traceback."""
    try:
        from apache_beam.runners.dataflow.internal import apiclient  # noqa: F401
    except ImportError as error:
        missing = getattr(error, "name", None) or error
        raise UserError(
            f"--runner {name}: submitting to Dataflow needs Beam's Google Cloud modules "
            f"({missing} is not installed); {DATAFLOW_EXTRA}"
        ) from None


def _validate(runner, options) -> None:
    """Beam's own check of the flags for this runner, before any work rather than when the
    pipeline is built. Without --temp_location or --staging_location Beam would look for a
    default bucket on Google Cloud first; that stays a missing flag here."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions, TestOptions
    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator

    # On this copy only: the check of the buckets' soft-delete policy reaches Cloud Storage,
    # and Beam repeats it when it builds the pipeline.
    options.view_as(TestOptions).dry_run = True
    validator = PipelineOptionsValidator(options, runner)
    cloud = options.view_as(GoogleCloudOptions)
    locations = [
        validator.validate_gcs_path(cloud, flag) for flag in ("temp_location", "staging_location")
    ]
    if validator.is_service_runner() and all(locations):
        errors = locations[0] + validator.validate_cloud_options(cloud)
    else:
        errors = validator.validate()
    if not errors and _is_embedded(runner, options):
        errors = _embedded_environment_errors(options)
    if errors:
        found = "; ".join(" ".join(error.split()).rstrip(".") for error in errors)
        raise UserError(f"--runner {type(runner).__name__}: {found}")


def _is_embedded(runner, options) -> bool:
    """A PortableRunner with its job server embedded in this process."""
    from apache_beam.options.pipeline_options import PortableOptions

    portable = _is_a(runner, "apache_beam.runners.portability.portable_runner", "PortableRunner")
    return portable and options.view_as(PortableOptions).job_endpoint == "embed"


# Beam's loopback process worker starts the SDK harness as `python` from PATH (worker_pool_main
# in Beam 2.77). One that cannot find Beam or this package dies at once, and the job server
# waits for it forever: asked first, without importing anything (a few ms).
_HARNESS_PROBE = (
    "import importlib.util as u, sys; "
    "sys.exit(not (u.find_spec('apache_beam') and u.find_spec('tfrecord_pipeline')))"
)


def _embedded_environment_errors(options) -> list[str]:
    """Why the embedded job server could not start the SDK harness the flags ask for; the job
    would fail with a traceback, or hang, instead."""
    from apache_beam.options.pipeline_options import DebugOptions, PortableOptions

    kind = (options.view_as(PortableOptions).environment_type or "DOCKER").upper()
    if kind == "DOCKER" and shutil.which("docker") is None:
        return [
            "its default environment runs the SDK harness in Docker, which is not installed "
            "here; add --environment_type LOOPBACK"
        ]
    if kind == "PROCESS":
        return [
            "the embedded job server cannot start a PROCESS environment; use "
            "--environment_type LOOPBACK"
        ]
    debug = options.view_as(DebugOptions)
    if kind == "LOOPBACK" and debug.lookup_experiment("use_loopback_process_worker", False):
        python = shutil.which("python")
        probe = python and subprocess.run([python, "-c", _HARNESS_PROBE], capture_output=True)
        if not probe or probe.returncode:
            return [
                "use_loopback_process_worker starts the SDK harness as `python` from PATH "
                f"({python or 'none found'}), which cannot import Beam and this package; "
                "activate the environment that holds them (. .venv/bin/activate)"
            ]
    return []


def describe(runner, options) -> Runner:
    """What `runner` (a PipelineRunner, with the PipelineOptions it runs) is to the conversion."""
    from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

    here = any(kind.__name__ in StandardOptions.LOCAL_RUNNERS for kind in type(runner).__mro__)
    embedded = _is_embedded(runner, options)
    direct = options.view_as(DirectOptions)
    in_process = direct.direct_running_mode == "in_memory" or direct.direct_num_workers == 1
    one_process = embedded or (here and in_process)
    here = here or embedded
    dataflow = _is_a(runner, "apache_beam.runners.dataflow.dataflow_runner", "DataflowRunner")
    processes = _sdk_processes(options, here, one_process, dataflow)
    return Runner(type(runner).__name__, here, dataflow, one_process, processes)


def _sdk_processes(options, here: bool, one_process: bool, dataflow: bool) -> int:
    """How many of the runner's worker processes share a machine's cores (0: one per core).
    Dataflow starts one SDK harness process per vCPU unless the job opts out with the
    `no_use_multiple_sdk_containers` experiment; the DirectRunner in multi_processing mode
    starts `--direct_num_workers` (0: one per core); other runners start
    `--sdk_worker_parallelism` (0: the runner's choice, taken as one per core)."""
    from apache_beam.options.pipeline_options import DebugOptions, DirectOptions, PortableOptions

    if one_process:
        return 1
    if dataflow:
        experiments = options.view_as(DebugOptions).experiments or []
        return 1 if "no_use_multiple_sdk_containers" in experiments else 0
    if here and options.view_as(DirectOptions).direct_running_mode == "multi_processing":
        return options.view_as(DirectOptions).direct_num_workers
    return int(options.view_as(PortableOptions).sdk_worker_parallelism)


def _is_a(runner, module: str, name: str) -> bool:
    """isinstance without importing: a runner of that class has loaded its module already."""
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(runner, getattr(loaded, name))


# The most `--processes`: past any machine's cores (the largest have a few hundred), where more
# processes only add memory; 100,000 forks took longer than converting ever would.
MAX_PROCESSES = 1024


def local_processes(requested: int) -> int:
    """Shards written at once on this machine: `--processes`, or when that is 0, one per core."""
    return requested or available_cores()
