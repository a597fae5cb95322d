"""The runner a --runner flag names, resolved as Beam resolves it; an embedded job server that
cannot start its harness is one line, and so is Dataflow without the dataflow extra; the local
runner's default process count."""

import re
import subprocess
import sys

import pytest
from conftest import BEAM, DATAFLOW, EMBEDDED, LOOPBACK, make_images, write_manifest

from tfrecord_pipeline.config import runner_choice
from tfrecord_pipeline.config.runner_choice import LOCAL, Runner, local_processes, resolve
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.write.threads import available_cores

DIRECT = Runner("SwitchingDirectRunner", here=True, dataflow=False, one_process=True)
DIRECT_PATH = "apache_beam.runners.direct.direct_runner.DirectRunner"
# One SDK harness process per vCPU, each sizing its shard writers' threads from one core.
ON_DATAFLOW = Runner(
    "DataflowRunner", here=False, dataflow=True, one_process=False, sdk_processes=0
)


@pytest.mark.parametrize(
    "flags, runner",
    [
        ([], LOCAL),
        (["--runner", "direct"], DIRECT),
        (["--runner", "directrunner"], DIRECT),
        (["--runner=DirectRunner"], DIRECT),
        (["--runner", DIRECT_PATH], DIRECT),
        (["--direct_num_workers=1"], DIRECT),  # Beam's default runner
        (
            ["--direct_num_workers=2", "--direct_running_mode=multi_processing"],
            DIRECT._replace(one_process=False, sdk_processes=2),
        ),
        (["--runner", "FnApiRunner"], Runner("FnApiRunner", True, False, True)),
        (["--runner", "TestDirectRunner"], Runner("TestDirectRunner", True, False, True)),
        (LOOPBACK, Runner("PortableRunner", True, False, True)),
        # The embedded job server starts one SDK harness, whatever --direct_num_workers says.
        (
            [*LOOPBACK, "--direct_num_workers=2", "--direct_running_mode=multi_processing"],
            Runner("PortableRunner", True, False, True),
        ),
        (
            ["--runner", "PortableRunner", "--job_endpoint", "localhost:8099"],
            Runner("PortableRunner", False, False, False),
        ),
        (["--runner", "SparkRunner"], Runner("SparkRunner", False, False, False)),
        (
            ["--runner", "SparkRunner", "--sdk_worker_parallelism=4"],
            Runner("SparkRunner", False, False, False, sdk_processes=4),
        ),
        (DATAFLOW, ON_DATAFLOW),
        (
            [*DATAFLOW, "--experiments=no_use_multiple_sdk_containers"],
            ON_DATAFLOW._replace(sdk_processes=1),
        ),
        (
            [*DATAFLOW, "--runner=TestDataflowRunner"],
            ON_DATAFLOW._replace(name="TestDataflowRunner"),
        ),
    ],
)
def test_the_runner_is_the_class_beam_resolves(flags, runner):
    assert resolve(flags) == runner


@pytest.mark.parametrize(
    "flags, says",
    [
        ([], "Docker, which is not installed here; add --environment_type LOOPBACK"),
        (
            ["--environment_type", "PROCESS", "--environment_option", "process_command=boot"],
            "cannot start a PROCESS environment",
        ),
        (
            ["--environment_type", "LOOPBACK", "--experiments", "use_loopback_process_worker"],
            "as `python` from PATH (none found), which cannot import Beam",
        ),
    ],
)
def test_an_embedded_job_server_that_could_not_start_its_harness_is_one_line(
    tmp_path, monkeypatch, flags, says
):
    """Beam would fail with a traceback (Docker, PROCESS) or wait forever for a harness that
    died at start (`python` without Beam): here neither Docker nor Python is on PATH."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(
        runner_choice, "_resolve", runner_choice._resolve.__wrapped__
    )  # PATH, not a cache
    with pytest.raises(UserError, match=re.escape("--runner PortableRunner: ")) as raised:
        resolve([*EMBEDDED, *flags])
    assert says in str(raised.value) and "\n" not in str(raised.value)


def test_local_runs_write_one_shard_per_core_unless_told():
    assert local_processes(0) == available_cores() and local_processes(3) == 3


# The command as `pip install tfrecord-pipeline` leaves it: what only Beam's [gcp] extra (the
# dataflow extra) installs cannot be imported.
WITHOUT_THE_DATAFLOW_EXTRA = (
    "import runpy, sys; "
    "sys.modules.update(dict.fromkeys(['google.cloud', 'google.api_core', 'apitools'])); "
    "runpy.run_module('tfrecord_pipeline.cli.main', run_name='__main__')"
)


def _without_the_dataflow_extra(tmp_path, *flags: str) -> subprocess.CompletedProcess:
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    argv = ["convert", "--manifest", manifest, "--output", tmp_path / "out", "--no_progress"]
    script = [sys.executable, "-c", WITHOUT_THE_DATAFLOW_EXTRA, *map(str, [*argv, *flags])]
    return subprocess.run(script, capture_output=True, text=True, timeout=300)


def test_dataflow_without_the_dataflow_extra_is_one_line_naming_it(tmp_path):
    """Beam's DataflowRunner loads without its Google Cloud modules and fails only as it
    submits, with a traceback; the command says which extra to install before any work."""
    done = _without_the_dataflow_extra(tmp_path, *DATAFLOW)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("tfrecord-pipeline: error: --runner DataflowRunner: ")
    assert done.stderr.rstrip().endswith("pip install 'tfrecord-pipeline[dataflow]'")


@pytest.mark.parametrize("flags", [[], BEAM], ids=["local", "DirectRunner"])
def test_the_base_install_converts_without_the_dataflow_extra(tmp_path, flags):
    """Beam, imported without apitools, logs that it is missing: not the user's concern."""
    done = _without_the_dataflow_extra(tmp_path, *flags)
    assert done.returncode == 0, done.stderr
    assert "apitools" not in done.stderr
    assert (tmp_path / "out" / "LATEST").is_file()
