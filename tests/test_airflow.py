"""The nightly refresh as Airflow runs it: deploy/airflow_dag.py's worker route, night after
night, under a real Airflow (its own environment, `make test` builds it: TFRP_AIRFLOW) with a
SQLite metadata database in a temporary folder, each night an `airflow dags test` process. What
is checked is what the nights published: the versions, their records, LATEST."""

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_images, python_path, write_manifest

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.commit import read_info
from tfrecord_pipeline.dataset.versions import VERSIONS
from tfrecord_pipeline.read.reader import examples

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
AIRFLOW = Path(os.environ.get("TFRP_AIRFLOW", ROOT / ".venv-airflow" / "bin" / "airflow"))
DAG_ID = "tfrecord_nightly"
FLAGS = ("--num_shards", "2")  # the nightly's own flags are the DAG's (deploy/airflow_dag.py)
RETRIED = "Marking task as UP_FOR_RETRY"
CLI = [sys.executable, "-m", "tfrecord_pipeline.cli.main"]
# The first attempt of a night run through this loses a race for real: once the run has read
# the published version it starts from, another conversion (argv[2]'s manifest) publishes.
RACER = """import os, subprocess, sys
from tfrecord_pipeline.cli.main import main
flag, other, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
def publish_first(event, args):
    if event == "open" and str(args[0]).endswith("/_COMMITTED") and not os.path.exists(flag):
        open(flag, "x").close()
        root = argv[argv.index("--output") + 1]
        subprocess.run([sys.executable, "-m", "tfrecord_pipeline.cli.main", "convert",
                        "--manifest", other, "--output", root, "--no_progress", *%r], check=True)
sys.addaudithook(publish_first)
sys.exit(main(argv))
"""


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Path:
    """A migrated metadata database, copied by each test (`airflow db migrate` once)."""
    assert AIRFLOW.is_file(), f"no Airflow at {AIRFLOW}: run `make .venv-airflow/.installed`"
    home = tmp_path_factory.mktemp("airflow")
    done = subprocess.run([AIRFLOW, "db", "migrate"], env=_env(home), capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return home / "airflow.db"


def _env(home: Path, **variables: str) -> dict[str, str]:
    """Airflow's environment: its home, this repository's deploy/ as its DAG folder, a retry a
    second after a failure, Variables as AIRFLOW_VAR_*; not this process's PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    config = {"HOME": home, "DAGS_FOLDER": ROOT / "deploy", "LOAD_EXAMPLES": "False"}
    config["DEFAULT_TASK_RETRY_DELAY"] = "1"
    env.update({f"AIRFLOW__CORE__{k}": str(v) for k, v in config.items()})
    env["AIRFLOW_HOME"] = str(home)
    env.update({f"AIRFLOW_VAR_TFRP_{k.upper()}": v for k, v in variables.items()})
    return env


class Nights:
    """One dataset's nights: manifests named by logical date, Airflow's home, its output root."""

    def __init__(self, tmp_path: Path, database: Path):
        self.folder, self.root = tmp_path / "manifests", tmp_path / "nightly"
        self.home = tmp_path / "airflow"
        self.folder.mkdir()
        self.home.mkdir()
        shutil.copy(database, self.home / database.name)
        self.command = shlex.join(["env", f"PYTHONPATH={python_path()}", *CLI])

    def manifest(self, night: str, rows: list[dict]) -> Path:
        return write_manifest(self.folder / f"{night}.csv", rows)

    def start(self, night: str, command: str = "") -> subprocess.Popen:
        variables = {"manifests": str(self.folder), "output": str(self.root)}
        variables |= {"command": command or self.command, "flags": shlex.join(FLAGS)}
        return subprocess.Popen(
            [AIRFLOW, "dags", "test", DAG_ID, night, "--conf", json.dumps({"route": "worker"})],
            env=_env(self.home, **variables),
            cwd=self.home,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def run(self, night: str, command: str = "") -> tuple[int, str]:
        """`airflow dags test` of `night`: its exit status and its log."""
        process = self.start(night, command)
        log = process.communicate(timeout=300)[0]
        return process.returncode, log

    def attempts(self, log: str) -> int:
        return log.count("[DAG TEST] starting task_id=convert_on_worker")

    def versions(self) -> list[Path]:
        """The committed versions, oldest first."""
        return sorted(p.parent for p in (self.root / VERSIONS).glob("*/_COMMITTED"))

    def latest(self) -> bytes:
        return (self.root / "LATEST").read_bytes()


def records(folder: Path) -> list[tuple]:
    """Every record of a version, read back with the project's reader: (key, label id, the
    stored image's digest, every other feature), sorted by key."""
    found = []
    for example in examples(str(folder), read_info(str(folder)), "train"):
        image = hashlib.sha256(example.pop("image/encoded")).hexdigest()
        key, label = example["image/source_id"], example["image/class/label"]
        found.append((key, label, image, sorted(map(repr, example.items()))))
    return sorted(found)


def full_conversion(manifest: Path, output: Path) -> list[tuple]:
    assert main(["convert", "--manifest", str(manifest), "--output", str(output), *FLAGS]) == 0
    return records(next((output / VERSIONS).glob("*")))


@pytest.fixture
def nights(tmp_path, database) -> Nights:
    return Nights(tmp_path, database)


@pytest.fixture
def rows(tmp_path) -> list[dict]:
    """Images of every label, by absolute path (the worker's folder is Airflow's)."""
    made = make_images(tmp_path, per_class=8)
    return [{**row, "image_uri": str(tmp_path / row["image_uri"])} for row in made]


def _changed(rows: list[dict], night: int) -> list[dict]:
    """Night `night`'s manifest: a row more and a row fewer each night (every label stays)."""
    return rows[night : len(rows) - 3 + night]


def test_three_nights_publish_three_refreshes_equal_to_full_conversions(nights, rows, tmp_path):
    ids = {}
    for night in range(3):
        manifest = nights.manifest(f"2026-11-0{night + 2}", _changed(rows, night))
        if night == 2:  # and an image changed since: other bytes, a later time
            shutil.copy(rows[9]["image_uri"], rows[8]["image_uri"])
        status, log = nights.run(f"2026-11-0{night + 2}")
        assert status == 0, log[-3000:]
        assert len(nights.versions()) == night + 1 and nights.attempts(log) == 1
        published = records(nights.versions()[-1])
        assert published == full_conversion(manifest, tmp_path / f"full{night}")
        for key, label, *_ in published:  # a label (its images' folder) keeps its id
            assert ids.setdefault(Path(key.decode()).parent.name, label) == label
        refresh = read_info(str(nights.versions()[-1])).refresh
        assert (refresh is None) == (night == 0) and (night == 0 or refresh["carried"] > 0)


@pytest.mark.parametrize("cause", ["missing manifest", "over --max_error_rate"])
def test_a_failed_night_fails_the_task_unretried_and_publishes_nothing(nights, rows, cause):
    nights.manifest("2026-11-02", rows)
    assert nights.run("2026-11-02")[0] == 0
    before = nights.latest(), nights.versions()
    if cause != "missing manifest":  # a third of the images are gone
        gone = [{**row, "image_uri": row["image_uri"] + ".gone"} for row in rows[::3]]
        nights.manifest("2026-11-03", [*rows[1::3], *gone])
    status, log = nights.run("2026-11-03")
    said = "no such file" if cause == "missing manifest" else "version not published"
    assert status != 0 and nights.attempts(log) == 1 and said in log
    assert "Marking task as FAILED" in log and RETRIED not in log
    assert (nights.latest(), nights.versions()) == before


def test_a_night_that_loses_a_race_is_retried_and_publishes_once(nights, rows, tmp_path):
    nights.manifest("2026-11-02", rows[:20])
    assert nights.run("2026-11-02")[0] == 0
    hotfix = write_manifest(tmp_path / "hotfix.csv", rows[:21])  # published during the night
    manifest = nights.manifest("2026-11-03", rows[:22])
    (tmp_path / "racer.py").write_text(RACER % (FLAGS,))
    racer = [*CLI[:1], str(tmp_path / "racer.py"), str(tmp_path / "raced"), str(hotfix)]
    command = shlex.join(["env", f"PYTHONPATH={python_path()}", *racer])
    status, log = nights.run("2026-11-03", command)
    assert status == 0, log[-3000:]
    assert "exit status 4: tfrecord-pipeline: failed: another run published" in log
    assert nights.attempts(log) == 2 and log.count(RETRIED) == 1
    first, hotfixed, night = nights.versions()  # the lost attempt published nothing
    assert records(hotfixed) == full_conversion(hotfix, tmp_path / "full-hotfix")
    assert records(night) == full_conversion(manifest, tmp_path / "full-night")
    assert json.loads(nights.latest())["version"] == night.name


def test_two_nights_started_together_publish_one_version_each(nights, rows, tmp_path):
    nights.manifest("2026-11-02", rows[:20])
    assert nights.run("2026-11-02")[0] == 0
    manifests = [nights.manifest(f"2026-11-0{n}", rows[n : 20 + n]) for n in (3, 4)]
    runs = [nights.start(night) for night in ("2026-11-03", "2026-11-04")]
    logs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], logs
    fulls = [full_conversion(m, tmp_path / m.stem) for m in manifests]
    first, *published = nights.versions()
    assert sorted(map(records, published)) == sorted(fulls)  # one each, never a mix
    losses = sum(log.count(RETRIED) for log in logs)
    assert sum(map(nights.attempts, logs)) == 2 + losses
