"""Airflow / Cloud Composer: the nightly refresh, on Dataflow or on the Airflow worker itself.

One DAG, two routes, chosen per run by the param `route` (`airflow dags trigger --conf`), else
by the Airflow Variable `tfrp_route`, else Dataflow:

- `dataflow`: a Flex Template launch whose body is deploy/nightly_launch.json, the one Cloud
  Scheduler posts; its placeholders become Jinja references to Airflow Variables
  (tfrp_template_path, ...), rendered when the task runs rather than when the file is parsed.
- `worker`: the command `tfrecord-pipeline convert --incremental` run on the worker as a
  subprocess, from the project's own environment (the Variable `tfrp_command`): Beam and Airflow
  pin conflicting versions, so they never share one environment. The night's manifest is
  `{{ var.value.tfrp_manifests }}/{{ ds }}.csv`. The command's exit status becomes the task's
  outcome: a fault or a lost race is an ordinary failure that Airflow retries; a mistake in the
  input, or a version the quality gates kept from publishing, fails the task without a retry,
  since a retry would meet the same input.

The Google provider is imported when the Dataflow route runs, not when the file is parsed: an
Airflow without it (a worker-route deployment, the project's tests) parses the DAG and runs the
worker route, and its install adds hundreds of packages the worker route never uses. The module
also imports without Airflow, so the project's tests check the launch body and the exit-status
table without it.
"""

import json
import logging
import shlex
import string
import subprocess
from pathlib import Path

LAUNCH_BODY = Path(__file__).with_name("nightly_launch.json")
NIGHTLY = ("--incremental", "--keep_versions", "7", "--no_progress")  # as the launch body's
# The command's exit statuses (docs/guarantees.md) that Airflow retries: a fault (3), a race
# lost to another publication (4), an interrupted run (130), a process killed by a signal (< 0).
# Any other failure (1: quality gates, 2: a mistake in the input) fails without a retry.
RETRIED = frozenset({3, 4, 130})


def launch_body(values: dict[str, str]) -> dict:
    """The flexTemplates:launch request body with ${NAME} placeholders filled from `values`."""
    return json.loads(string.Template(LAUNCH_BODY.read_text()).substitute(values))


def worker_argv(command: str, manifest: str, output: str, flags: str = "") -> list[str]:
    """The nightly conversion on the worker: `command` (the project's `tfrecord-pipeline`, as a
    shell would split it), the night's manifest into `output`, `flags` added to NIGHTLY."""
    paths = ["--manifest", manifest, "--output", output]
    return [*shlex.split(command), "convert", *paths, *NIGHTLY, *shlex.split(flags)]


def is_retried(status: int) -> bool:
    """Whether a failed conversion's exit status is worth running again unchanged."""
    return status < 0 or status in RETRIED


def run_conversion(argv: list[str]) -> str:
    """Runs the conversion, its output in the task log; returns the summary's last line (the
    version's folder). A failure raises AirflowException (retried) or AirflowFailException."""
    from airflow.exceptions import AirflowException, AirflowFailException

    done = subprocess.run(argv, capture_output=True, text=True)
    log = logging.getLogger(__name__)
    for line in done.stdout.splitlines():
        log.info("%s", line)
    for line in done.stderr.splitlines():
        log.error("%s", line)
    if done.returncode == 0:
        return done.stdout.strip().splitlines()[-1]
    said = done.stderr.strip().splitlines()[-1:] or ["(nothing on stderr)"]
    failure = f"exit status {done.returncode}: {said[0]}"
    raise (AirflowException if is_retried(done.returncode) else AirflowFailException)(failure)


try:
    from airflow import DAG
except ImportError:  # not in an Airflow environment: the DAG is not defined
    DAG = None

if DAG is not None:
    import pendulum
    from airflow.decorators import task
    from airflow.models import Variable
    from airflow.models.param import Param
    from airflow.operators.python import get_current_context

    @task.branch
    def choose_route() -> str:
        route = get_current_context()["params"]["route"] or Variable.get("tfrp_route", "dataflow")
        return {"dataflow": "launch_on_dataflow", "worker": "convert_on_worker"}[route]

    @task
    def launch_on_dataflow() -> None:
        from airflow.providers.google.cloud.operators.dataflow import (
            DataflowStartFlexTemplateOperator,
        )

        context = get_current_context()
        names = ("TEMPLATE_PATH", "DATA_BUCKET", "WORKER_SA", "IMAGE")
        variables = context["var"]["value"]
        DataflowStartFlexTemplateOperator(
            task_id="launch",
            project_id=variables.tfrp_project,
            location=variables.tfrp_region,
            body=launch_body({n: variables.get(f"tfrp_{n.lower()}") for n in names}),
            wait_until_finished=True,
        ).execute(context)

    @task
    def convert_on_worker(command: str, manifest: str, output: str, flags: str) -> str:
        return run_conversion(worker_argv(command, manifest, output, flags))

    with DAG(
        dag_id="tfrecord_nightly",
        schedule="0 3 * * *",
        start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
        catchup=False,
        max_active_runs=2,  # a night that overlaps the next is safe: one of them loses and retries
        default_args={"retries": 3},  # retry_delay: [core] default_task_retry_delay (300 s)
        params={"route": Param(None, type=["null", "string"], enum=[None, "dataflow", "worker"])},
        tags=["tfrecord-pipeline"],
    ) as dag:
        worker = convert_on_worker(
            command="{{ var.value.tfrp_command }}",
            manifest="{{ var.value.tfrp_manifests }}/{{ ds }}.csv",
            output="{{ var.value.tfrp_output }}",
            flags="{{ var.value.get('tfrp_flags', '') }}",
        )
        choose_route() >> [launch_on_dataflow(), worker]
