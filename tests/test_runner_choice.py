"""The runner a --runner flag names, resolved as Beam resolves it; an embedded job server that
cannot start its harness is one line; the local runner's default process count."""

import re

import pytest
from conftest import DATAFLOW, EMBEDDED, LOOPBACK

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
