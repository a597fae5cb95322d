"""deploy/ is checked against the code: template parameters, pins, image, launch body, scripts."""

import argparse
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

from tfrecord_pipeline.config.arguments import _parser, parse_args

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
# a terminal's progress bar and tracebacks; waiting is the launcher's business; processes on
# this machine
LOCAL_ONLY = {"progress", "wait", "processes", "debug"}


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, DEPLOY / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lock() -> dict[str, str]:
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    return {re.sub(r"[-_.]+", "-", n).lower(): v for n, _, v in (x.partition("==") for x in lines)}


def test_template_parameters_match_the_cli_flags():
    flags = {
        action.dest: action
        for action in _parser()._actions
        if not isinstance(action, argparse._HelpAction) and action.dest not in LOCAL_ONLY
    }
    parameters = {
        p["name"]: p for p in json.loads((DEPLOY / "metadata.json").read_text())["parameters"]
    }
    assert set(parameters) == set(flags)
    for name, parameter in parameters.items():
        assert parameter["isOptional"] == (not flags[name].required), name
        for example in flags[name].choices or ():
            assert any(re.match(rx, example) for rx in parameter.get("regexes", [".*"])), name


def test_worker_pins_are_the_lock_without_tensorflow():
    generated = _load("pin_requirements").render()
    assert (DEPLOY / "requirements.txt").read_text() == generated, "run deploy/pin_requirements.py"
    lock = _lock()
    for line in generated.splitlines()[1:]:
        name, _, version = line.partition("==")
        assert lock[name] == version, name
        assert not name.startswith(("tensorflow", "keras")), name


def test_image_is_built_on_the_pinned_beam_sdk():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    beam = re.search(r"FROM apache/beam_python(\d+\.\d+)_sdk:(\S+)", dockerfile)
    assert beam and beam.group(2) == _lock()["apache-beam"]
    assert beam.group(1) == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert "FLEX_TEMPLATE_PYTHON_PY_FILE=/template/main.py" in dockerfile


def test_nightly_launch_body_is_valid_for_the_cli_and_the_dag(tmp_path):
    dag = _load("airflow_dag")  # imports without Airflow installed
    values = {
        "TEMPLATE_PATH": "gs://b/t.json",
        "DATA_BUCKET": "b",
        "WORKER_SA": "w@p",
        "IMAGE": "i",
    }
    body = dag.launch_body(values)["launchParameter"]
    metadata = json.loads((DEPLOY / "metadata.json").read_text())
    assert set(body["parameters"]) <= {p["name"] for p in metadata["parameters"]}
    (tmp_path / "labels.txt").write_text("cat\n")
    parameters = {**body["parameters"], "label_map": str(tmp_path / "labels.txt")}
    options, _ = parse_args([f"--{name}={value}" for name, value in parameters.items()])
    assert options.incremental and options.keep_versions == 7 and options.validate == "full"


def test_scripts_parse_and_the_entry_point_speaks_one_line():
    for script in ("build_template.sh", "schedule.sh"):
        subprocess.run(["bash", "-n", str(DEPLOY / script)], check=True)
    done = subprocess.run(
        [sys.executable, str(DEPLOY / "main.py"), "--manifest=/nonexistent/m.csv", "--output=x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
