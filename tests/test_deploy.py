"""deploy/ is checked against the code: template parameters, pins, image, launch body, scripts."""

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from conftest import make_images, pip_install, write_manifest

from tfrecord_pipeline.cli.main import (
    EXIT_FAILED_GATES,
    EXIT_FAULT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SUPERSEDED,
    EXIT_USER_ERROR,
)
from tfrecord_pipeline.config import template
from tfrecord_pipeline.config.arguments import _parser, parse_args
from tfrecord_pipeline.version import __version__

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


def test_template_metadata_is_the_one_the_declarations_make():
    generated = template.render()
    committed = (DEPLOY / "metadata.json").read_text()
    assert committed == generated, "deploy/metadata.json drifted: run deploy/template_metadata.py"


def test_template_parameters_match_the_cli_flags():
    flags = {
        action.dest: action
        for action in _parser()._actions
        if not isinstance(action, argparse._HelpAction) and action.dest not in LOCAL_ONLY
    }
    parameters = {p["name"]: p for p in template.metadata()["parameters"]}
    assert set(parameters) == set(flags)
    for name, parameter in parameters.items():
        assert parameter["isOptional"] == (not flags[name].required), name
        for example in flags[name].choices or ():
            assert any(re.match(rx, example) for rx in parameter.get("regexes", [".*"])), name
        assert all(re.compile(rx) for rx in parameter.get("regexes", [])), name


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
    assert options.incremental and options.keep_versions == 7 and options.validate == "scans"
    assert options.run_key is None  # Cloud Scheduler posts one body every night: no run's key


def test_the_dags_worker_route_converts_with_the_launch_s_options(tmp_path):
    """Its options, the run's key among them, are the Dataflow route's."""
    dag = _load("airflow_dag")
    (tmp_path / "labels.txt").write_text("cat\n")
    key = "scheduled__2026-11-02T03:00:00+00:00"  # Airflow's run_id
    argv = dag.worker_argv("tfrecord-pipeline --debug", str(tmp_path), "2026-11-02", "out", "", key)
    assert argv[:3] == ["tfrecord-pipeline", "--debug", "convert"]
    worker, _ = parse_args(argv[3:])
    assert worker.run_key == key
    names = ("TEMPLATE_PATH", "DATA_BUCKET", "WORKER_SA", "IMAGE")
    body = dag.launch_body(dict.fromkeys(names, "b"), key)["launchParameter"]
    parameters = {**body["parameters"], "label_map": worker.label_map}
    launched, _ = parse_args([f"--{name}={value}" for name, value in parameters.items()])
    assert worker.manifest == [f"{tmp_path}/2026-11-02.csv"] and worker.output == "out"
    places = {"manifest": [], "output": "", "progress": False}  # a terminal's bar, not the job's
    assert replace(worker, **places) == replace(launched, **places)
    later = dag.worker_argv("x", str(tmp_path), "d", "out", "--keep_versions 2")
    assert parse_args(later[2:])[0].keep_versions == 2  # the Variable's flags win


def test_the_dag_retries_faults_and_lost_races_only():
    dag = _load("airflow_dag")
    retried = {status for status in range(-15, 256) if dag.is_retried(status)}
    assert retried == {*range(-15, 0), EXIT_FAULT, EXIT_SUPERSEDED, EXIT_INTERRUPTED}
    assert not {EXIT_OK, EXIT_FAILED_GATES, EXIT_USER_ERROR} & retried


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


def _image_files(dockerfile: str, root: Path) -> None:
    """The files the image's COPY instructions put in it (another stage's left out), laid out
    under `root` as Docker lays them out: a folder's contents into the target, files into a
    target ending in `/`."""
    for line in dockerfile.splitlines():
        words = line.split()
        if words[:1] != ["COPY"] or words[1].startswith("--from"):
            continue
        *sources, target = words[1:]
        for source in map(ROOT.joinpath, sources):
            into = root / target.lstrip("/")
            if source.is_dir():
                shutil.copytree(source, into, ignore=shutil.ignore_patterns("__pycache__"))
                continue
            into = into / source.name if target.endswith("/") else into
            into.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, into)


def test_the_image_installs_the_package_and_its_entry_point_converts(tmp_path):
    """The image's /template as its COPY instructions make it, installed as its RUN does
    (`pip install --no-deps`), and the launcher's `python main.py --flag=value ...` run there:
    the installed package converts, and no folder beside main.py stands in for it."""
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    image = tmp_path / "image"
    _image_files(dockerfile, image)
    (installed,) = re.findall(
        r"^RUN pip install --no-cache-dir --no-deps (/\S+)$", dockerfile, re.M
    )
    for name in ("FLEX_TEMPLATE_PYTHON_PY_FILE", "FLEX_TEMPLATE_PYTHON_SETUP_FILE"):
        (path,) = re.findall(rf"^ENV {name}=(\S+)$", dockerfile, re.MULTILINE)
        assert (image / path.lstrip("/")).is_file(), name
    assert f"FLEX_TEMPLATE_PYTHON_SETUP_FILE={installed}/setup.py" in dockerfile  # the same
    site = pip_install(image / installed.lstrip("/"), tmp_path / "site")
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    done = subprocess.run(
        [sys.executable, "main.py", f"--manifest={manifest}", f"--output={tmp_path / 'out'}"],
        cwd=image / "template",  # the image's WORKDIR
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "LATEST").is_file()


def test_the_template_script_reads_the_version_without_the_package_installed(tmp_path):
    """build_template.sh runs in a checkout, with whatever Python the shell finds: one that
    imports nothing from site-packages (-S), so not this project, still gives the version."""
    for name in ("python", "python3"):
        shim = tmp_path / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
        shim.chmod(0o755)
    script = (DEPLOY / "build_template.sh").read_text()
    (line,) = re.findall(r"^VERSION=.*$", script, re.MULTILINE)
    done = subprocess.run(
        ["bash", "-c", f'{line}\necho "$VERSION"'],
        cwd=ROOT,
        env={**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
    )
    assert done.stdout == f"{__version__}\n", done.stderr
