"""The Beam pipeline on Beam's portable engine: the Fn API SDK harness, the worker side of
Dataflow Runner v2, in processes of its own, writing the local runner's bytes.

Two engines. The portable runner with an embedded job server: the job goes through the Job API
as a pipeline proto and runs on one SDK harness process (Beam's embedded job server starts one,
whatever --direct_num_workers says). The FnApiRunner with two SDK harness processes
(`sdk_worker_main`, the Python SDK container's entry point), which splits every stage between
them. Each converts, publishes, and refreshes with --incremental, from the command line, with
shards that --num_shards makes larger than --target_shard_mb: Beam writes them in pieces and
joins them (the local runner writes them whole).
"""

import os
import sys
import threading
from pathlib import Path

import pytest
from conftest import arguments, encode, make_images, photo, published, write_manifest

from tfrecord_pipeline.cli.main import main

pytestmark = pytest.mark.slow

PORTABLE = arguments(
    "--runner PortableRunner --job_endpoint embed --environment_type LOOPBACK"
    " --experiments use_loopback_process_worker"
)
TWO_HARNESSES = arguments(
    "--runner FnApiRunner --direct_num_workers 2 --direct_running_mode multi_processing"
)
ENGINES = {"portable": (PORTABLE, 1), "two_harnesses": (TWO_HARNESSES, 2)}
# Beam writes each shard in pieces of --target_shard_mb, then joins them.
FLAGS = arguments(
    "--num_shards 4 --split train=0.75,validation=0.25 --max_error_rate 0.5"
    " --target_shard_mb 0.003 --no_progress"
)


@pytest.fixture(autouse=True)
def _python_on_path(monkeypatch):
    """Beam's loopback process worker starts the harness as `python` from PATH: this one."""
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])
    monkeypatch.setenv("PATH", path)


def _manifests(root):
    """The first night's manifest (good rows, a truncated JPEG, a missing file, a repeated key,
    a bad split) and the next night's, with more images and one row gone."""
    rows = make_images(root, per_class=6)
    (root / "images/truncated.jpg").write_bytes(encode(photo().resize((64, 48)))[:-300])
    rows += [
        {"image_uri": "images/truncated.jpg", "label": "coffee"},
        {"image_uri": "images/nowhere.jpg", "label": "rocket"},
        {"image_uri": rows[0]["image_uri"], "label": rows[0]["label"]},
        {"image_uri": rows[1]["image_uri"], "label": rows[1]["label"], "split": "bad split"},
    ]
    grown = make_images(root / "more", per_class=2, seed=11)
    more = [{**row, "image_uri": f"more/{row['image_uri']}"} for row in grown]
    first = write_manifest(root / "night1.csv", rows)
    return first, write_manifest(root / "night2.csv", rows[1:] + more)


def _convert(manifest, output, *flags):
    argv = ["convert", "--manifest", str(manifest), "--output", str(output), *FLAGS, *flags]
    assert main(argv) == 0
    return published(output)


def _files(version):
    return {p.relative_to(version): p.read_bytes() for p in version.rglob("*") if p.is_file()}


class Descendants:
    """Every process started under this one while the block runs, as {pid: (parent, argv)},
    from /proc every 20 ms: a Beam SDK harness lives for the whole job (seconds). (A harness
    of an earlier job may still be ending: Beam leaves it to exit by itself.)"""

    def __enter__(self):
        self.seen: dict[int, tuple[int, list[str]]] = {}
        self._earlier = set(self._descendants())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _watch(self):
        while not self._stop.wait(0.02):
            for pid, parent in self._descendants().items():
                if pid not in self._earlier:
                    # Read again each time: a process caught between its fork and its exec
                    # still shows its parent's command line (a zombie shows none).
                    argv = _argv(pid)
                    if any(argv) or pid not in self.seen:
                        self.seen[pid] = (parent, argv)

    @staticmethod
    def _descendants() -> dict[int, int]:
        """{pid: parent pid} of every process under this one."""
        parents = dict(filter(None, map(_parent, Path("/proc").glob("[0-9]*"))))
        found = {}
        for pid, parent in parents.items():
            ancestor = parent
            while ancestor in parents and ancestor != os.getpid():
                ancestor = parents[ancestor]
            if ancestor == os.getpid():
                found[pid] = parent
        return found

    def harnesses(self) -> set[int]:
        """Beam's SDK harness processes: `python -m ...sdk_worker_main` (the FnApiRunner's,
        and the SDK container's entry point) or the loopback worker's `python -c ...`."""
        return {pid for pid, (_, argv) in self.seen.items() if any(map(_is_harness, argv))}


def _is_harness(arg: str) -> bool:
    return arg == "apache_beam.runners.worker.sdk_worker_main" or arg.startswith(
        "from apache_beam.runners.worker.sdk_worker import SdkHarness"
    )


def _parent(proc: Path) -> tuple[int, int] | None:
    try:
        stat = (proc / "stat").read_text()
    except OSError:  # it ended meanwhile
        return None
    return int(proc.name), int(stat.rsplit(")", 1)[1].split()[1])


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


FORMATS = ("tfrecord", "array_record")


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """The two nights' manifests, and what the local runner publishes from each in each format,
    a conversion then a refresh: the files every engine must write alike (converted once)."""
    root = tmp_path_factory.mktemp("nights")
    manifests = _manifests(root)
    local = {}
    for file_format in FORMATS:
        for night, manifest in enumerate(manifests):
            more = ["--file_format", file_format, *(["--incremental"] if night else [])]
            local[file_format, night] = _files(_convert(manifest, root / file_format, *more))
    return manifests, local


@pytest.mark.parametrize("file_format", FORMATS)
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_conversion_and_its_refresh_write_the_local_runners_bytes(
    tmp_path, nights, engine, file_format
):
    """Each from the command line, published; the Beam runs on their SDK harness processes."""
    manifests, published_locally = nights
    flags, harnesses = ENGINES[engine]
    for night, manifest in enumerate(manifests):
        more = ["--file_format", file_format, *(["--incremental"] if night else [])]
        local = published_locally[file_format, night]
        with Descendants() as processes:
            beam = _files(_convert(manifest, tmp_path / engine, *more, *flags))
        assert len(processes.harnesses()) == harnesses
        assert sorted(beam) == sorted(local) and any(name.parts[0] == "errors" for name in local)
        for name, data in local.items():
            assert beam[name] == data, f"night {night + 1}: {name}"


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_gs_images_read_through_faults_in_sdk_harnesses_give_the_bytes_of_a_clean_run(
    tmp_path, gcs, faulty_gcs, engine
):
    """The harness processes read each image on connections of their own (their retries wait
    as long as they do in production: the harness is not this process). The clean run is the
    local runner's: the same bytes as the engine's, as the test above checks of both."""
    write_manifest(tmp_path / "src" / "manifest.csv", make_images(tmp_path / "src", per_class=4))
    prefix = f"harness-{engine}-{tmp_path.name}"
    source = gcs(tmp_path / "src", prefix)
    flags = ["--max_error_rate", "0", "--num_shards", "2", "--no_progress"]
    convert = ["convert", "--manifest", f"{source}/manifest.csv", *flags, "--output"]
    assert main([*convert, str(tmp_path / "clean")]) == 0
    proxy = faulty_gcs(f"{prefix}/images/", rate=0.3, seed=5)
    assert main([*convert, str(tmp_path / "faulty"), *ENGINES[engine][0]]) == 0
    assert proxy.faults and _files(published(tmp_path / "faulty")) == _files(
        published(tmp_path / "clean")
    )
