"""Airflow / Cloud Composer: the nightly refresh as a DAG of one Dataflow Flex Template launch.

The launch body is deploy/nightly_launch.json, the same one Cloud Scheduler posts; its
placeholders become Jinja references to Airflow Variables (tfrp_template_path, ...),
rendered when the task runs rather than when the scheduler parses the file. The module imports
without Airflow (the DAG is only defined where Airflow is installed), so the project's tests
check the body without installing Airflow, a large dependency tree the converter never needs.
"""

import json
import string
from pathlib import Path

LAUNCH_BODY = Path(__file__).with_name("nightly_launch.json")


def launch_body(values: dict[str, str]) -> dict:
    """The flexTemplates:launch request body with ${NAME} placeholders filled from `values`."""
    return json.loads(string.Template(LAUNCH_BODY.read_text()).substitute(values))


try:
    from airflow import DAG
    from airflow.providers.google.cloud.operators.dataflow import (
        DataflowStartFlexTemplateOperator,
    )
except ImportError:  # not in an Airflow environment: the DAG is not defined
    DAG = None

if DAG is not None:
    import pendulum

    with DAG(
        dag_id="tfrecord_nightly",
        schedule="0 3 * * *",
        start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
        catchup=False,
        tags=["tfrecord-pipeline"],
    ) as dag:
        names = ("TEMPLATE_PATH", "DATA_BUCKET", "WORKER_SA", "IMAGE")
        DataflowStartFlexTemplateOperator(
            task_id="convert",
            project_id="{{ var.value.tfrp_project }}",
            location="{{ var.value.tfrp_region }}",
            body=launch_body({n: f"{{{{ var.value.tfrp_{n.lower()} }}}}" for n in names}),
            wait_until_finished=True,
        )
