"""The built wheel in an empty virtualenv, as a user installs it (`pip install`, no `make`):
pip resolves its dependencies from the package registry this machine's pip is configured for,
then the README's commands run there, with no TensorFlow installed, and the package is one
top-level name; Dataflow, whose modules only the `dataflow` extra installs, says so in one line.

Without the registry (no network) the dependencies cannot be installed: the test is skipped,
saying so.
"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import DATAFLOW, REPOSITORY
from test_readme import examples

import tfrecord_pipeline

pytestmark = pytest.mark.slow
TOP_LEVEL = "tfrecord_pipeline"
TF, TFDS = (f"(or install tfrecord-pipeline with its [{extra}] extra)" for extra in ("tf", "tfds"))
INFO = f"tfrecord_pipeline-{tfrecord_pipeline.__version__}.dist-info"


def _unreachable(run) -> str | None:
    """Why pip cannot read the registry's index (its last line), or None when it can."""
    probe = ["python", "-m", "pip", "index", "versions", "apache-beam", "--retries", "0"]
    done = run(*probe, "--timeout", "15")
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel built from this checkout, and a function running a command in an empty
    virtualenv (its own Python first on PATH) that holds the wheel and the dependencies pip
    resolved for it, in a user's folder."""
    folder = tmp_path_factory.mktemp("wheel")
    build = ["wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", folder]
    subprocess.run([sys.executable, "-m", "pip", *build, REPOSITORY], check=True)
    (wheel,) = folder.glob("*.whl")
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)  # no system packages
    # The virtualenv's alone: not the folder this suite installed the checkout into.
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    environment["PATH"] = f"{venv / 'bin'}{os.pathsep}{environment['PATH']}"
    home = folder / "user"
    home.mkdir()

    def run(*argv) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(word) for word in argv], cwd=home, env=environment, capture_output=True, text=True
        )

    if why := _unreachable(run):
        pytest.skip(f"the package registry cannot be reached to install dependencies: {why}")
    # --no-compile: pip's byte-compiling of every module it installed (Beam's and Google's
    # clients' thousands) is most of the install's time; Python compiles what a command
    # imports as it imports it, and pip never fails an install over a module it could not
    # compile, so nothing checked here depends on it.
    done = run("python", "-m", "pip", "install", "--quiet", "--no-compile", wheel)
    assert done.returncode == 0, done.stderr
    return wheel, run


def test_the_wheel_is_one_top_level_package(installed):
    wheel, run = installed
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(f"{INFO}/top_level.txt").decode() == f"{TOP_LEVEL}\n"
        record = archive.read(f"{INFO}/RECORD").decode().splitlines()
    assert {line.split("/")[0] for line in record} == {TOP_LEVEL, INFO}
    done = run("python", "-c", "import tfrecord_pipeline.transforms, pipeline")
    assert done.stderr.endswith("ModuleNotFoundError: No module named 'pipeline'\n")
    done = run("python", "-c", "import transforms")
    assert done.stderr.endswith("ModuleNotFoundError: No module named 'transforms'\n")


def test_the_readme_s_commands_run_without_tensorflow(installed):
    """The README's shell examples as written (not `make`, `pip` or the cloud's), in order, in
    a folder holding the sample as a clone does; then nothing of TensorFlow is there."""
    _, run = installed
    home = Path(run("python", "-c", "import os; print(os.getcwd())").stdout.strip())
    shutil.copytree(REPOSITORY / "sample", home / "sample")
    commands = [
        example
        for example in examples(REPOSITORY / "README.md")
        if example.language == "sh"
        and not (example.needs_cloud or example.is_make or example.is_install)
    ]
    assert len(commands) >= 4, "the README's quick start, its check and its look"
    said = []
    for example in commands:
        done = run("bash", "-e", "-c", example.code)
        assert done.returncode == 0, f"{example.where}:\n{done.stderr[-3000:]}"
        said.append(done.stdout)
    assert f"tfrecord-pipeline {tfrecord_pipeline.__version__}\n" in said
    assert any("out/flowers: ok," in printed for printed in said)
    assert (home / "out" / "report.html").is_file()
    for module in ("tensorflow", "tensorflow_datasets"):  # none was pulled in
        done = run("python", "-c", f"import {module}")
        assert done.stderr.endswith(f"ModuleNotFoundError: No module named '{module}'\n")


@pytest.mark.parametrize(
    "call, line",
    [
        ("load", f"ImportError: load() needs TensorFlow: pip install tensorflow {TF}"),
        (
            "tfds_builder",
            "ImportError: tfds_builder() needs TensorFlow Datasets: "
            f"pip install tensorflow tensorflow-datasets {TFDS}",
        ),
    ],
)
def test_a_reader_without_its_extra_says_which_in_one_line(installed, call, line):
    _, run = installed
    done = run("python", "-c", f"import tfrecord_pipeline; tfrecord_pipeline.{call}('out')")
    assert done.returncode == 1 and done.stderr.splitlines()[-1] == line, done.stderr


def test_the_base_install_leaves_dataflow_to_its_extra_and_says_so_in_one_line(installed):
    """No Google Cloud client library comes with `pip install tfrecord-pipeline` (Beam's [gcp]
    extra is the `dataflow` extra's); a Dataflow job asks for it before any work."""
    _, run = installed
    done = run("python", "-c", "import google.cloud")
    assert done.stderr.endswith("ModuleNotFoundError: No module named 'google.cloud'\n")
    manifest = REPOSITORY / "sample" / "manifest.csv"
    done = run("tfrecord-pipeline", "convert", "--manifest", manifest, "--output", "out", *DATAFLOW)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("tfrecord-pipeline: error: --runner DataflowRunner: ")
    assert done.stderr.endswith("; pip install 'tfrecord-pipeline[dataflow]'\n")
