"""The nightly refresh as Airflow runs it: deploy/airflow_dag.py under a real Airflow (its own
environment, which `make test` builds and names in TFRP_AIRFLOW), a SQLite metadata database in a
temporary folder, each night an `airflow dags test` process on the worker route. What is checked
is what the nights published: the versions, their records, LATEST."""

import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import test_readme
from conftest import make_images, published, python_path, write_manifest

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.commit import read_info
from tfrecord_pipeline.dataset.versions import VERSIONS
from tfrecord_pipeline.read.reader import examples

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
AIRFLOW = Path(os.environ.get("TFRP_AIRFLOW", ROOT / ".venv-airflow" / "bin" / "airflow"))
DAG_ID = "tfrecord_nightly"
# Added to the nightly's flags: two shards, and a split that leaves no split empty on 24 images
# (the nightly's 5% validation split of so few could be, and the version not published).
FLAGS = shlex.join(["--num_shards", "2", "--split", "train=0.5,validation=0.5"])
RETRIED = "Marking task as UP_FOR_RETRY"
CLI = [sys.executable, "-m", "tfrecord_pipeline.cli.main"]
# Wrappers of the command run it as its entry point does (its shard writers forks, as the
# installed command's are: a script calling `main` would start them from a forkserver,
# which imports the script again).
# The first attempt of a night run through this loses a race for real: once the run has read
# the version it starts from, another conversion (of argv[2], a manifest; a run by hand, without
# the night's --run_key) publishes.
RACER = """import os, re, subprocess, sys
from tfrecord_pipeline.cli.main import entry_point
flag, other, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
def publish_first(event, args):
    if event == "open" and str(args[0]).endswith("/_COMMITTED") and not os.path.exists(flag):
        open(flag, "x").close()
        by_hand = [a for a in argv if not a.startswith("--run_key=")]
        argv_other = [re.sub("^--manifest=.*", "--manifest=" + other, a) for a in by_hand]
        command = [sys.executable, "-m", "tfrecord_pipeline.cli.main", *argv_other]
        subprocess.run(command, check=True)
sys.addaudithook(publish_first)
sys.argv = ["tfrecord-pipeline", *argv]
entry_point()
"""

# The first attempt of a night run through this publishes and is then killed (SIGKILL) before
# it exits: at the first thing it does once the rename of its LATEST took effect.
KILLED = """import os, signal, sys
from tfrecord_pipeline.cli.main import entry_point
flag, argv = sys.argv[1], sys.argv[2:]
renamed = []
def killed_once_published(event, args):
    if event == "os.rename" and str(args[1]).endswith("/LATEST") and not os.path.exists(flag):
        renamed.append(str(args[0]))
    elif renamed and not os.path.lexists(renamed[0]):
        renamed.clear()
        open(flag, "x").close()
        os.kill(os.getpid(), signal.SIGKILL)
sys.addaudithook(killed_once_published)
sys.argv = ["tfrecord-pipeline", *argv]
entry_point()
"""


def _dag_module():
    """deploy/airflow_dag.py, imported here without Airflow: its worker command line."""
    spec = importlib.util.spec_from_file_location("airflow_dag", ROOT / "deploy" / "airflow_dag.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def airflow() -> Path:
    """The Airflow to run: missing, the tests fail (a skip would pass a suite that ran none)."""
    assert AIRFLOW.is_file(), f"no Airflow at {AIRFLOW}: run `make .venv-airflow/.installed`"
    return AIRFLOW


@pytest.fixture(scope="module")
def database(tmp_path_factory, airflow) -> Path:
    """A migrated metadata database, copied by each test (`airflow db migrate` once)."""
    home = tmp_path_factory.mktemp("airflow")
    done = subprocess.run([AIRFLOW, "db", "migrate"], env=_env(home), capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return home / "airflow.db"


def _env(home: Path, **variables: str) -> dict[str, str]:
    """Airflow's environment: its home, this repository's deploy/ as its DAG folder, a retry a
    second after a failure, Variables as AIRFLOW_VAR_*; not this process's PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    config = {"DAGS_FOLDER": ROOT / "deploy", "LOAD_EXAMPLES": False, "DEFAULT_TASK_RETRY_DELAY": 1}
    env.update({f"AIRFLOW__CORE__{k}": str(v) for k, v in config.items()})
    env["AIRFLOW_HOME"] = str(home)
    env.update({f"AIRFLOW_VAR_TFRP_{k.upper()}": v for k, v in variables.items()})
    return env


class Nights:
    """One dataset's nights: manifests named by logical date, Airflow's home, its output root."""

    def __init__(self, tmp_path: Path, database: Path, labels: list[str]):
        self.folder, self.root = tmp_path / "manifests", tmp_path / "nightly"
        self.home = tmp_path / "airflow"
        self.folder.mkdir()
        self.home.mkdir()
        (self.folder / "labels.txt").write_text("".join(f"{name}\n" for name in labels))
        shutil.copy(database, self.home / database.name)
        self.command = shlex.join(["env", f"PYTHONPATH={python_path()}", *CLI])

    def manifest(self, night: str, rows: list[dict]) -> Path:
        return write_manifest(self.folder / f"{night}.csv", rows)

    def start(self, night: str, command: str = "", conf: dict | None = None) -> subprocess.Popen:
        """`airflow dags test` of `night` started, on the route the Variable tfrp_route names
        (worker) unless `conf` (the run's params) says another."""
        variables = {"manifests": str(self.folder), "output": str(self.root), "flags": FLAGS}
        variables |= {"command": command or self.command, "route": "worker"}
        return subprocess.Popen(
            [AIRFLOW, "dags", "test", DAG_ID, night, "--conf", json.dumps(conf or {})],
            env=_env(self.home, **variables),
            cwd=self.home,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def run(self, night: str, command: str = "", conf: dict | None = None) -> tuple[int, str]:
        """`airflow dags test` of `night`: its exit status and its log."""
        process = self.start(night, command, conf)
        log = process.communicate(timeout=300)[0]
        return process.returncode, log

    def attempts(self, log: str) -> int:
        return log.count("[DAG TEST] starting task_id=convert_on_worker")

    def versions(self) -> list[Path]:
        """The committed versions, oldest first."""
        return sorted(p.parent for p in (self.root / VERSIONS).glob("*/_COMMITTED"))

    def latest(self) -> bytes:
        return (self.root / "LATEST").read_bytes()

    def full_conversion(self, night: str, output: Path) -> list[tuple]:
        """The records of the night's manifest converted whole, as the nightly converts it."""
        argv = _dag_module().worker_argv("", str(self.folder), night, str(output), FLAGS)
        assert main(argv) == 0
        return records(next((output / VERSIONS).glob("*")))


def records(folder: Path) -> list[tuple]:
    """Every record of a version, read back with the project's reader: (split, key, label id,
    the stored image's digest, every other feature), sorted."""
    found, info = [], read_info(str(folder))
    for split in info.splits:
        for example in examples(str(folder), info, split):
            image = hashlib.sha256(example.pop("image/encoded")).hexdigest()
            key, label = example["image/source_id"], example["image/class/label"]
            found.append((split, key, label, image, sorted(map(repr, example.items()))))
    return sorted(found)


@pytest.fixture
def nights(tmp_path, database, rows) -> Nights:
    return Nights(tmp_path, database, sorted({row["label"] for row in rows}))


@pytest.fixture
def rows(tmp_path) -> list[dict]:
    """Images of every label, by absolute path (the worker's folder is Airflow's)."""
    made = make_images(tmp_path, per_class=8)
    return [{**row, "image_uri": str(tmp_path / row["image_uri"])} for row in made]


def test_three_nights_publish_three_refreshes_equal_to_full_conversions(nights, rows, tmp_path):
    """Each night a row goes and a row comes; before the third an image changes. Each night's
    version holds what its manifest converted whole holds, made by converting only what
    changed (rows converted, records dropped), and every label keeps its id."""
    ids, changes = {}, {"2026-11-02": None, "2026-11-03": (1, 1), "2026-11-04": (2, 2)}
    for shift, night in enumerate(changes):
        nights.manifest(night, rows[shift : shift + 21])
        if night == "2026-11-04":  # other bytes, a later time
            shutil.copy(rows[9]["image_uri"], rows[8]["image_uri"])
        status, log = nights.run(night)
        assert status == 0 and nights.attempts(log) == 1, log[-3000:]
        published = records(nights.versions()[-1])
        assert published == nights.full_conversion(night, tmp_path / night)
        for _, key, label, *_ in published:  # a label (its images' folder) keeps its id
            assert ids.setdefault(Path(key.decode()).parent.name, label) == label
        refresh = read_info(str(nights.versions()[-1])).refresh
        assert (refresh and (refresh["converted"], refresh["dropped"])) == changes[night]
    assert len(nights.versions()) == 3


@pytest.mark.parametrize(
    ("cause", "said"),
    [
        ("missing manifest", "exit status 2: tfrecord-pipeline: error: --manifest: no such file"),
        ("over --max_error_rate", "exit status 1: tfrecord-pipeline: version not published"),
    ],
)
def test_a_failed_night_fails_the_task_unretried_and_publishes_nothing(nights, rows, cause, said):
    nights.manifest("2026-11-02", rows)
    assert nights.run("2026-11-02")[0] == 0
    before = nights.latest(), nights.versions()
    if cause != "missing manifest":  # a third of the images are gone
        gone = [{**row, "image_uri": row["image_uri"] + ".gone"} for row in rows[::3]]
        nights.manifest("2026-11-03", [*rows[1::3], *gone])
    status, log = nights.run("2026-11-03")
    assert status == 1 and nights.attempts(log) == 1 and f"AirflowFailException: {said}" in log
    assert "Marking task as FAILED" in log and RETRIED not in log
    assert (nights.latest(), nights.versions()) == before


def test_the_run_s_param_chooses_the_route_over_the_variable(nights, rows):
    """`--conf '{"route": "dataflow"}'` launches on Dataflow although the Variable says worker:
    here, without the Google provider, the launch fails saying what it needs."""
    nights.manifest("2026-11-02", rows)
    status, log = nights.run("2026-11-02", conf={"route": "dataflow"})
    assert status != 0 and "needs apache-airflow-providers-google" in log
    assert nights.attempts(log) == 0 and not nights.root.exists()


def test_a_night_that_loses_a_race_is_retried_and_publishes_once(nights, rows, tmp_path):
    nights.manifest("2026-11-02", rows[:20])
    assert nights.run("2026-11-02")[0] == 0
    nights.manifest("hotfix", rows[:21])  # published by hand while the night runs
    nights.manifest("2026-11-03", rows[:22])
    (tmp_path / "racer.py").write_text(RACER)
    racer = [str(tmp_path / "racer.py"), str(tmp_path / "raced"), str(nights.folder / "hotfix.csv")]
    command = shlex.join(["env", f"PYTHONPATH={python_path()}", sys.executable, *racer])
    status, log = nights.run("2026-11-03", command)
    assert status == 0, log[-3000:]
    assert "exit status 4: tfrecord-pipeline: failed: another run published" in log
    assert nights.attempts(log) == 2 and log.count(RETRIED) == 1
    first, hotfixed, night = nights.versions()  # the lost attempt published nothing
    assert records(hotfixed) == nights.full_conversion("hotfix", tmp_path / "full-hotfix")
    assert records(night) == nights.full_conversion("2026-11-03", tmp_path / "full-night")
    assert json.loads(nights.latest())["version"] == night.name


def test_a_night_killed_after_publishing_is_retried_and_publishes_nothing_more(nights, rows):
    """The DAG passes the run's id as --run_key: the retry finds the version the killed attempt
    published and publishes no second version of the night."""
    nights.manifest("2026-11-02", rows[:20])
    assert nights.run("2026-11-02")[0] == 0
    nights.manifest("2026-11-03", rows[:22])
    (nights.folder.parent / "killed.py").write_text(KILLED)
    killed = [str(nights.folder.parent / name) for name in ("killed.py", "killed")]
    command = shlex.join(["env", f"PYTHONPATH={python_path()}", sys.executable, *killed])
    status, log = nights.run("2026-11-03", command)
    assert status == 0, log[-3000:]
    assert "AirflowException: exit status -9" in log and (nights.folder.parent / "killed").exists()
    assert nights.attempts(log) == 2 and log.count(RETRIED) == 1
    assert len(nights.versions()) == 2  # the first night's, and one of this night's, not two
    first, night = nights.versions()
    assert f"was published already, as {night.name}" in log
    assert json.loads(nights.latest())["version"] == night.name
    full = nights.full_conversion("2026-11-03", nights.folder.parent / "full")
    assert records(night) == full
    assert read_info(str(night)).options["run_key"] == "manual__2026-11-03T00:00:00+00:00"


def test_two_nights_started_together_publish_one_version_each(nights, rows, tmp_path):
    """Two `airflow dags test` processes at once, each a night from the same version: both
    publish, one after the other or the second superseded (4) and retried, and each version
    holds one night's manifest whole. (Two processes, because with SQLite Airflow's scheduler
    runs only the SequentialExecutor, one task at a time; max_active_runs is its limit.)"""
    nights.manifest("2026-11-02", rows[:20])
    assert nights.run("2026-11-02")[0] == 0
    together = ("2026-11-03", "2026-11-04")
    for shift, night in enumerate(together, 1):
        nights.manifest(night, rows[shift : 20 + shift])
    runs = [nights.start(night) for night in together]
    logs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], logs
    fulls = [nights.full_conversion(night, nights.folder.parent / night) for night in together]
    first, *published = nights.versions()
    assert sorted(map(records, published)) == sorted(fulls)  # one each, never a mix
    losses = sum(log.count(RETRIED) for log in logs)
    assert sum(map(nights.attempts, logs)) == 2 + losses


def test_the_docs_night_runs_as_written(airflow, tmp_path):
    """docs/runners.md's Airflow example, in a folder holding the sample and deploy/ as the
    repository does, with Airflow's and the project's commands on the PATH."""
    (example,) = [e for e in test_readme.examples(ROOT / "docs" / "runners.md") if e.needs_airflow]
    for folder in ("sample", "deploy"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    commands = [str(Path(sys.executable).parent), str(airflow.parent), os.environ["PATH"]]
    env = {**os.environ, "PATH": os.pathsep.join(commands), "PYTHONPATH": python_path()}
    bash = ["bash", "-e", "-c", example.code]
    done = subprocess.run(bash, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{example.where}:\n{done.stderr[-3000:]}"
    said = json.loads(done.stdout.splitlines()[-1])["version"]
    assert said == published(tmp_path / "out" / "nightly").name
