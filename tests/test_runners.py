"""The runner a --runner flag names, resolved as Beam resolves it, and what the command does
with each: local runners run to the end and print the summary; only Dataflow prints a job."""

import pytest
from conftest import DATAFLOW, make_images, published, write_manifest

from pipeline.cli import main
from pipeline.publish import MARKER
from pipeline.runners import LOCAL, Runner, resolve

DIRECT = Runner("SwitchingDirectRunner", here=True, dataflow=False, one_process=True)
DIRECT_PATH = "apache_beam.runners.direct.direct_runner.DirectRunner"
# One SDK harness process per vCPU, each sizing its shard writers' threads from one core.
ON_DATAFLOW = Runner("DataflowRunner", here=False, dataflow=True, one_process=False,
                     sdk_processes=0)  # fmt: skip
EMBEDDED = ["--runner", "PortableRunner", "--job_endpoint", "embed"]


@pytest.mark.parametrize(
    "flags, runner",
    [
        ([], LOCAL),
        (["--runner", "direct"], DIRECT),
        (["--runner", "directrunner"], DIRECT),
        (["--runner=DirectRunner"], DIRECT),
        (["--runner", DIRECT_PATH], DIRECT),
        (["--direct_num_workers=1"], DIRECT),  # Beam's default runner
        (["--direct_num_workers=2", "--direct_running_mode=multi_processing"],
         DIRECT._replace(one_process=False, sdk_processes=2)),
        (["--runner", "FnApiRunner"], Runner("FnApiRunner", True, False, True)),
        (["--runner", "TestDirectRunner"], Runner("TestDirectRunner", True, False, True)),
        (EMBEDDED, Runner("PortableRunner", True, False, True)),
        (["--runner", "PortableRunner", "--job_endpoint", "localhost:8099"],
         Runner("PortableRunner", False, False, False)),
        (["--runner", "SparkRunner"], Runner("SparkRunner", False, False, False)),
        (["--runner", "SparkRunner", "--sdk_worker_parallelism=4"],
         Runner("SparkRunner", False, False, False, sdk_processes=4)),
        (DATAFLOW, ON_DATAFLOW),
        ([*DATAFLOW, "--experiments=no_use_multiple_sdk_containers"],
         ON_DATAFLOW._replace(sdk_processes=1)),
        ([*DATAFLOW, "--runner=TestDataflowRunner"],
         ON_DATAFLOW._replace(name="TestDataflowRunner")),
    ],
)  # fmt: skip
def test_the_runner_is_the_class_beam_resolves(flags, runner):
    assert resolve(flags) == runner


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags",
    [
        ["--runner", "directrunner"],  # once a "dry run" that did nothing
        ["--runner", "FnApiRunner"],
        [*EMBEDDED, "--environment_type", "LOOPBACK"],  # the SDK harness on threads here
    ],
    ids=["directrunner", "FnApiRunner", "PortableRunner-embed"],
)
def test_every_local_runner_runs_to_the_end_and_prints_the_summary(tmp_path, capsys, flags):
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    out = tmp_path / "out"
    argv = ["convert", "--manifest", str(manifest), "--output", str(out), "--no_progress"]
    assert main([*argv, "--num_shards", "2", *flags]) == 0
    printed = capsys.readouterr().out
    assert "dry run" not in printed and "Dataflow" not in printed
    version = published(out)
    assert printed.rstrip().endswith(f"version: {version}  (published)")
    assert (version / MARKER).exists() and len(list(version.glob("*.tfrecord"))) == 2
