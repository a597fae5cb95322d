"""Airflow / Cloud Composer: the nightly refresh, on Dataflow or on an Airflow worker.

One DAG, two routes, chosen per run by the param `route` (`--conf '{"route": "worker"}'`), else
by the Airflow Variable `tfrp_route`, else Dataflow. Both convert with the flags of
deploy/nightly_launch.json, the launch Cloud Scheduler posts, so a night is the same dataset
whichever route ran it:

- `dataflow`: that launch, by the Google provider's DataflowStartFlexTemplateOperator; its
  placeholders become Jinja references to Airflow Variables (tfrp_template_path, ...), rendered
  when the task runs rather than when the file is parsed.
- `worker`: `tfrecord-pipeline convert` as a subprocess of the task, from the project's own
  environment (the Variable `tfrp_command`): Beam and Airflow pin conflicting versions, so they
  never share one. The night's manifest is `{{ var.value.tfrp_manifests }}/{{ ds }}.csv`, its
  labels `labels.txt` beside it, as the launch reads `manifests/*.csv` and `manifests/labels.txt`.
  The exit status becomes the task's outcome: a fault or a race lost to another publication is
  an ordinary failure, which Airflow retries; a mistake in the input, or a version the quality
  gates kept from publishing, fails the task without a retry, which would meet the same input.

Both routes pass the DAG run's `run_id` as `--run_key`: the same for every attempt of a night's
task, so an attempt that published and was then seen to fail (killed before it exited, a launch
reported failed after its job published) is retried into a run that publishes nothing and
exits 0 (pipeline/dataset/run_keys.py). Cloud Scheduler's launch of the same body carries no
key: its request body is fixed, with nothing in it that differs from one night to the next.

Where the Google provider is not installed, the DAG still parses and its Dataflow task fails
saying so: the provider adds some 1.7 GB of Google client libraries that the worker route never
uses. The module imports without Airflow, so the tests check the launch body and the
exit-status table without it.
"""

import json
import logging
import shlex
import string
import subprocess
from pathlib import Path

LAUNCH_BODY = Path(__file__).with_name("nightly_launch.json")
# The command's exit statuses (docs/guarantees.md) that Airflow retries: a fault (3), a race
# lost to another publication (4), an interrupted run (130), a process killed by a signal (< 0).
# Any other failure (1: quality gates, 2: a mistake in the input, 70: a bug) fails without a
# retry.
RETRIED = frozenset({3, 4, 130})


def launch_body(values: dict[str, str], run_key: str = "") -> dict:
    """The flexTemplates:launch request body with ${NAME} placeholders filled from `values`,
    and the run's key (`--run_key`) added to its parameters when one is given."""
    body = json.loads(string.Template(LAUNCH_BODY.read_text()).substitute(values))
    if run_key:
        body["launchParameter"]["parameters"]["run_key"] = run_key
    return body


def worker_argv(
    command: str, manifests: str, night: str, output: str, flags: str, run_key: str = ""
) -> list[str]:
    """The nightly conversion on a worker: `command` (the project's `tfrecord-pipeline`, split
    as a shell splits it) converts the night's manifest in the folder `manifests` into `output`
    with the launch's flags but its places on the bucket, and `run_key` if given, then `flags`
    (a later flag wins)."""
    parameters = json.loads(LAUNCH_BODY.read_text())["launchParameter"]["parameters"]
    nightly = [f"--{name}={value}" for name, value in parameters.items() if "${" not in value]
    nightly += [f"--run_key={run_key}"] if run_key else []
    paths = [f"--manifest={manifests}/{night}.csv", f"--label_map={manifests}/labels.txt"]
    conversion = [*paths, f"--output={output}", *nightly, "--no_progress", *shlex.split(flags)]
    return [*shlex.split(command), "convert", *conversion]


def is_retried(status: int) -> bool:
    """Whether a failed conversion's exit status is worth running again unchanged."""
    return status < 0 or status in RETRIED


def run_conversion(argv: list[str]) -> str:
    """Runs the conversion, what it prints in the task log; returns its summary's last line
    (`version: FOLDER  (published)`). A failure raises AirflowException (retried) or
    AirflowFailException (not), saying the exit status and the command's last line."""
    from airflow.exceptions import AirflowException, AirflowFailException

    done = subprocess.run(argv, capture_output=True, text=True)
    log = logging.getLogger(__name__)
    for line in done.stdout.splitlines():
        log.info("%s", line)
    for line in done.stderr.splitlines():
        log.warning("%s", line)
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
    from airflow.exceptions import AirflowFailException
    from airflow.models import Variable
    from airflow.models.param import Param
    from airflow.operators.python import get_current_context

    try:
        from airflow.providers.google.cloud.operators.dataflow import (
            DataflowStartFlexTemplateOperator,
        )
    except ImportError as missing:
        DataflowStartFlexTemplateOperator = None
        unavailable = f"the dataflow route needs apache-airflow-providers-google ({missing})"

    ROUTES = {"dataflow": "launch_on_dataflow", "worker": "convert_on_worker"}

    @task.branch
    def choose_route() -> str:
        route = get_current_context()["params"]["route"] or Variable.get("tfrp_route", "dataflow")
        if route not in ROUTES:
            raise AirflowFailException(f"tfrp_route is {route!r}; it names one of {list(ROUTES)}")
        return ROUTES[route]

    @task(task_id="launch_on_dataflow")
    def no_provider() -> None:
        raise AirflowFailException(unavailable)

    @task
    def convert_on_worker(
        command: str, manifests: str, night: str, output: str, flags: str, run_key: str
    ):
        return run_conversion(worker_argv(command, manifests, night, output, flags, run_key))

    with DAG(
        dag_id="tfrecord_nightly",
        schedule="0 3 * * *",
        start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
        catchup=False,
        max_active_runs=2,  # two nights may overlap: one publishes, the other loses and retries
        default_args={"retries": 3},  # the delay: [core] default_task_retry_delay (300 s)
        params={"route": Param(None, type=["null", "string"], enum=[None, *ROUTES])},
        tags=["tfrecord-pipeline"],
    ) as dag:
        names = ("TEMPLATE_PATH", "DATA_BUCKET", "WORKER_SA", "IMAGE")
        dataflow = (
            no_provider()
            if DataflowStartFlexTemplateOperator is None
            else DataflowStartFlexTemplateOperator(
                task_id="launch_on_dataflow",
                project_id="{{ var.value.tfrp_project }}",
                location="{{ var.value.tfrp_region }}",
                body=launch_body(
                    {n: f"{{{{ var.value.tfrp_{n.lower()} }}}}" for n in names}, "{{ run_id }}"
                ),
                wait_until_finished=True,
                retries=1,  # a failed job reports no exit status: one more launch, not three
            )
        )
        worker = convert_on_worker(
            command="{{ var.value.tfrp_command }}",
            manifests="{{ var.value.tfrp_manifests }}",
            night="{{ ds }}",
            output="{{ var.value.tfrp_output }}",
            flags="{{ var.value.get('tfrp_flags', '') }}",
            run_key="{{ run_id }}",
        )
        choose_route() >> [dataflow, worker]
