"""Fixtures: small datasets made from the photos in sample/photos, and a helper to run the
converter."""

import csv
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

# Google credential discovery must never leave this machine: skip the GCE metadata probe and
# point any metadata lookup at a closed loopback port. Set before google-auth is imported.
os.environ["NO_GCE_CHECK"] = "true"
os.environ["GCE_METADATA_HOST"] = os.environ["GCE_METADATA_IP"] = "127.0.0.1:9"

import pytest
from PIL import Image

import tfrecord_pipeline
from tfrecord_pipeline import transforms
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.dataset.versions import resolve
from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig, row_position
from tfrecord_pipeline.transforms.manifest.sources import describe, read_all
from tfrecord_pipeline.transforms.write.error_files import ErrorCounts, counted_as

REPOSITORY = Path(__file__).resolve().parents[1]
PHOTOS = REPOSITORY / "sample" / "photos"  # committed: the tests need nothing beside the clone


def _differs_from_this_checkout() -> str | None:
    """The first installed module that is not this checkout's file, if any. `make test`
    installs a copy of the checkout; a run against another install (an editable one pointing
    elsewhere, an older wheel) would test code that is not here."""
    for folder, package in (("pipeline", tfrecord_pipeline), ("transforms", transforms)):
        installed = Path(package.__file__).resolve().parent
        for source in (REPOSITORY / folder).rglob("*.py"):
            copy = installed / source.relative_to(REPOSITORY / folder)
            if not copy.is_file() or copy.read_bytes() != source.read_bytes():
                return str(copy)
    return None


if stale := _differs_from_this_checkout():
    pytest.exit(f"testing {stale}, not this checkout's: install it (make test does)", 1)

# The tiers (CONTRIBUTING.md, pyproject.toml's markers). Every test of an end-to-end file is
# `e2e`, and so is every test taking a fixture that runs the whole pipeline on both runners or
# starts a service; `make check` runs the rest (none slow, e2e nor bench) and the parity case.
# The end-to-end files: their tests run the command (often in a process of its own), a Beam
# pipeline (TestPipeline included), a real Airflow, browser or store, or real faults.
E2E_FILES = {
    *("test_cli", "test_cli_help", "test_cli_faults", "test_mistakes", "test_summary"),
    *("test_pipeline", "test_portable", "test_dataflow", "test_gcs", "test_deploy"),
    *("test_detection_pipeline", "test_masks_pipeline", "test_multilabel", "test_airflow"),
    *("test_beam_manifests", "test_beam_plan", "test_beam_shards", "test_conversion"),
    *("test_archive_inputs", "test_carried_archives"),
    *("test_faults", "test_read_faults", "test_error_sink", "test_error_files", "test_losing"),
    *("test_refresh", "test_rollback", "test_listings", "test_streamed_shards", "test_progress"),
    *("test_local_pool", "test_wheel", "test_packaging", "test_readme", "test_docs_site"),
    *("test_consumers", "test_tfds", "test_tensorflow_reader", "test_grain_source", "test_load"),
}
E2E_FIXTURES = {"convert", "gcs"}
# Both runners, threads, shard-writer processes and Beam's worker processes give the same bytes:
# the matrix's case with images passed through (its other cases are the same runs, decoding).
PARITY = (
    "tests/test_pipeline.py::"
    "test_same_input_gives_identical_bytes_whatever_the_runner_and_parallelism[pass-through]"
)


def pytest_collection_modifyitems(items):
    """Marks each test's tier: `parity`, `e2e`, and `check` for the fast tier."""
    for item in items:
        if item.nodeid == PARITY:
            item.add_marker(pytest.mark.parity)
        elif (
            item.path.stem in E2E_FILES
            or item.path.stem.startswith("test_hostile")
            or E2E_FIXTURES & set(item.fixturenames)
        ):
            item.add_marker(pytest.mark.e2e)
        if item.nodeid == PARITY or not any(
            item.get_closest_marker(name) for name in ("slow", "e2e", "bench")
        ):
            item.add_marker(pytest.mark.check)


def chromium() -> str:
    """A headless-capable Chromium to look at a page with; the test is skipped, saying so, where
    there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.skip(
        "no Chromium to look at the page with: apt-get install chromium (make test "
        "installs it where it can)"
    )


def python_path(*folders: Path) -> str:
    """PYTHONPATH for a child Python: `folders`, then the one this run was given (where `make
    test` installed the checkout's copy; an editable install needs none)."""
    return os.pathsep.join([*map(str, folders), *filter(None, [os.environ.get("PYTHONPATH")])])


def pip_install(source: Path, target: Path) -> Path:
    """`source` (a folder holding setup.py, or an sdist) installed without its dependencies
    into the folder `target`, as `make test` installs the checkout; returns `target`."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )
    return target


def arguments(line: str, **values) -> list[str]:
    """A command line written as one string: split on whitespace first, then each word's
    `{name}`s filled in from `values`, so a path holding a space stays one argument."""
    return [word.format(**values) for word in line.split()]


RGB_SOURCES = ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg")
# The Beam pipeline on the in-process DirectRunner: one worker keeps a test to about a second.
BEAM = ["--runner", "DirectRunner", "--direct_num_workers=1"]
RUNNERS = {"local": [], "beam": BEAM}  # the Beam-free local runner takes no Beam flags
# Beam's embedded job server, and with it the SDK harness on threads here.
EMBEDDED = ["--runner", "PortableRunner", "--job_endpoint", "embed"]
LOOPBACK = [*EMBEDDED, "--environment_type", "LOOPBACK"]
# Complete Dataflow flags, for a job that is built and not submitted.
DATAFLOW = arguments(
    "--runner=DataflowRunner --dry_run=True --temp_location=gs://tfrp-test/tmp"
    " --project=test-project --region=us-central1"
)


def photo(name: str = "astronaut.png") -> Image.Image:
    return Image.open(PHOTOS / name).convert("RGB")


def crop(image: Image.Image, rng: random.Random, longest: int = 96) -> Image.Image:
    side = rng.randint(min(image.size) // 3, min(image.size))
    left = rng.randint(0, image.width - side)
    top = rng.randint(0, image.height - side)
    tile = image.crop((left, top, left + side, top + side))
    return tile.resize((longest, rng.randint(longest // 2, longest)))


def encode(image: Image.Image, fmt: str = "JPEG", **params) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def write_manifest(path: Path, rows: list[dict]) -> Path:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        return path
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def make_images(root: Path, per_class: int = 5, seed: int = 7) -> list[dict]:
    """JPEG crops under root/images/<label>/, labelled by source photo; manifest rows back."""
    rng = random.Random(seed)
    rows = []
    for source in RGB_SOURCES:
        label = source.split(".")[0]
        folder = root / "images" / label
        folder.mkdir(parents=True, exist_ok=True)
        image = photo(source)
        for index in range(per_class):
            name = f"images/{label}/{index}.jpg"
            (root / name).write_bytes(encode(crop(image, rng), quality=85))
            rows.append({"image_uri": name, "label": label})
    return rows


def manifest_row(key: str, split: str = "train", uri: str = "x.jpg") -> ManifestRow:
    """A row of m.csv at byte 2, labelled by the first folder of its key."""
    return ManifestRow(key, uri, key.split("/")[0], split, (), "m.csv", row_position(0, 2))


def read_manifest(path: str, number: int = 0, config: ReadConfig | None = None) -> list:
    """One manifest checked as the launcher checks it, then read whole as the local runner
    reads it: its rows, error rows and skipped files."""
    config = config or ReadConfig()
    return list(read_all(describe(str(path), number, config), config))


@pytest.fixture
def dataset(tmp_path) -> Path:
    """A 20-image CSV manifest with relative paths; returns the manifest path."""
    return write_manifest(tmp_path / "manifest.csv", make_images(tmp_path))


@pytest.fixture(params=sorted(RUNNERS))
def convert(request, tmp_path):
    """Run a conversion, once on each runner (the test runs twice); returns the new version's
    folder and its DatasetInfo."""

    def _convert(manifest, *flags, output=None):
        output = str(output or tmp_path / "out")
        argv = ["--manifest", str(manifest), "--output", output, "--no_progress", *flags]
        converted = run([*argv, *RUNNERS[request.param]])
        return Path(converted.folder), converted.info

    return _convert


def error_rows(version: Path) -> list[dict]:
    """Every rejected row of a version, read from all its errors files."""
    files = sorted((Path(version) / "errors").glob("errors-*.jsonl"))
    return [json.loads(line) for path in files for line in path.read_text().splitlines()]


def count_errors(errors) -> ErrorCounts:
    """The counts of `errors` taken all at once: what a sink or combiner that counts them as
    they arise must come to."""
    return ErrorCounts.of(Counter(map(counted_as, errors)))


def convert_into(manifest, output, *flags) -> tuple[Path, object]:
    """Convert `manifest` into the root `output` (no progress bar); the new version's folder
    and its DatasetInfo."""
    argv = ["--manifest", str(manifest), "--output", str(output), "--no_progress", *flags]
    converted = run(argv)
    return Path(converted.folder), converted.info


def command(
    *argv: str, timeout: int = 300, env: dict | None = None, cwd: Path = REPOSITORY
) -> subprocess.CompletedProcess:
    """`tfrecord-pipeline ARGV...` in a process of its own, as a user runs it from `cwd` (in
    `env`, else this process's environment): its status and what it printed."""
    return subprocess.run(
        [sys.executable, "-m", "tfrecord_pipeline.cli.main", *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=env,
    )


def dataset_info(**fields) -> DatasetInfo:
    """A dataset's metadata with every field not given empty: for what is made from one."""
    counts = {"rows_in": 0, "records": 0, "errors": 0, "skipped_files": 0}
    empty = {"options": {}, "features": {}, "labels": {}, "errors_by_reason": {}, "splits": {}}
    return DatasetInfo(
        **{"tool_version": "0", "compression": "none", "failures": [], **counts, **empty, **fields}
    )


def version_files(version: Path) -> dict[str, bytes]:
    """Every file of a version folder by its path inside it: what two conversions compare."""
    return {str(p.relative_to(version)): p.read_bytes() for p in version.rglob("*") if p.is_file()}


def published(root) -> Path:
    """The folder of the version the dataset at `root` publishes (checked as readers check it)."""
    return Path(resolve(str(root)).folder)


def traced_peak(setup: str, work: str, *args: str) -> tuple[list[str], int]:
    """The words the code `work` prints, and the most memory Python held while it ran,
    counted by tracemalloc (not sampled: the same every run), in a process of its own
    (`args` its sys.argv[1:]), where no store or proxy of the test's holds bytes too. The code
    `setup` runs before the count starts: its imports and warm-up are memory of code, not of
    the bytes `work` reads."""
    script = "\n".join(
        ("import sys, tracemalloc", setup, "tracemalloc.start()", work)
        + ("print(tracemalloc.get_traced_memory()[1])",)
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, check=True
    )
    *printed, peak = done.stdout.split()
    return printed, int(peak)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def gcs():
    """The GCS JSON API (gcp-storage-emulator) on a loopback port, with one bucket.

    Beam's gs:// filesystem and the google-cloud-storage client both follow
    STORAGE_EMULATOR_HOST. Yields a function that uploads a local folder to gs://bucket/prefix.
    """
    from apache_beam.internal.gcp import auth
    from google.cloud import storage

    port = _free_port()
    emulator = Path(sys.executable).parent / "gcp-storage-emulator"
    server = subprocess.Popen(
        [emulator, "start", "--host=127.0.0.1", f"--port={port}", "--in-memory"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.environ["STORAGE_EMULATOR_HOST"] = f"http://127.0.0.1:{port}"
    # No credentials exist here; tell Beam so now rather than after four slow retries.
    auth._Credentials._credentials_init, auth._Credentials._credentials = True, None
    client = storage.Client.create_anonymous_client()
    for _ in range(100):
        try:
            bucket = client.create_bucket("tfrp-test", project="test")
            break
        except Exception:  # the server is still starting
            time.sleep(0.1)
    else:
        server.kill()
        pytest.fail("gcp-storage-emulator did not start")

    def upload(folder: Path, prefix: str) -> str:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                name = f"{prefix}/{path.relative_to(folder).as_posix()}"
                bucket.blob(name).upload_from_filename(str(path))
        return f"gs://tfrp-test/{prefix}"

    upload.port, upload.bucket = port, bucket
    yield upload
    server.kill()
    server.wait()
    del os.environ["STORAGE_EMULATOR_HOST"]


@pytest.fixture
def faulty_gcs(gcs, monkeypatch):
    """Starts a FaultProxy (tests/fault_proxy.py) in front of the emulator and points every
    Cloud Storage client made from then on at it, until the test ends; a read's retries wait
    milliseconds rather than seconds. Returns the function that starts it."""
    from fault_proxy import FaultProxy

    from tfrecord_pipeline.transforms.storage import retry

    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0.001)
    proxies = []

    def start(prefix: str, **faults) -> FaultProxy:
        proxy = FaultProxy(gcs.port, prefix, **faults).__enter__()
        proxies.append(proxy)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{proxy.port}")
        return proxy

    yield start
    monkeypatch.undo()
    for proxy in proxies:
        proxy.__exit__(None, None, None)


@pytest.fixture
def scripted_store(monkeypatch):
    """Starts a ScriptedServer (tests/scripted_server.py) as the store that requests go to
    (STORAGE_EMULATOR_HOST) until the test ends; returns the function that starts one."""
    from scripted_server import ScriptedServer

    servers = []

    def start(answer, idle_close_s=None) -> ScriptedServer:
        server = ScriptedServer(answer, idle_close_s).__enter__()
        servers.append(server)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{server.port}")
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)
