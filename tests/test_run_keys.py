"""`--run_key`: a run repeating the key of a version already published publishes nothing, says
which version, and exits 0, having read no image; on this machine, on Beam, on gs://, and when
a Dataflow launch is retried. Two attempts of one key that overlap publish once."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BEAM, DATAFLOW, command, make_images, published, write_manifest

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.commit import read_info
from tfrecord_pipeline.dataset.versions import VERSIONS
from tfrecord_pipeline.transforms.storage import fileio

# The first conversion run through this is overlapped by a second one with the same flags:
# once the first has started and looked for its key, the second converts and publishes.
OVERLAPPED = """import os, subprocess, sys
from tfrecord_pipeline.cli.main import main
flag, argv = sys.argv[1], sys.argv[2:]
def overlapped(event, args):
    if event == "open" and str(args[0]).endswith("/_COMMITTED") and not os.path.exists(flag):
        open(flag, "x").close()
        command = [sys.executable, "-m", "tfrecord_pipeline.cli.main", *argv]
        subprocess.run(command, check=True)
sys.addaudithook(overlapped)
sys.exit(main(argv))
"""


def _versions(root) -> list[str]:
    return sorted(fileio.names_in(fileio.join(str(root), VERSIONS)))


def _convert(manifest, root, *flags: str) -> subprocess.CompletedProcess:
    argv = ["--manifest", manifest, "--output", root, "--num_shards", "2", "--no_progress"]
    return command("convert", *argv, *flags)


def test_a_key_published_already_publishes_nothing_and_names_its_version(tmp_path):
    rows = make_images(tmp_path, per_class=3)
    manifest, root = write_manifest(tmp_path / "m.csv", rows), tmp_path / "out"
    first = _convert(manifest, root, "--run_key", "night-1")
    assert first.returncode == 0, first.stderr
    night_1 = published(root)
    assert read_info(str(night_1)).options["run_key"] == "night-1"
    refresh = _convert(manifest, root, "--run_key", "night-2", "--incremental")
    assert refresh.returncode == 0 and "converting every row" not in refresh.stderr
    night_2 = published(root)
    assert read_info(str(night_2)).refresh["carried"] == len(rows)  # the key blocks no refresh
    assert read_info(str(night_2)).options["run_key"] == "night-2"
    shutil.move(tmp_path / "images", tmp_path / "away")  # a conversion now would fail its gates
    latest = (root / "LATEST").read_bytes()
    for key, version in (("night-1", night_1), ("night-2", night_2)):
        again = _convert(manifest, root, "--run_key", key, "--incremental")
        assert again.returncode == 0, again.stderr
        said = f"--run_key {key} was published already, as {version.name}: nothing converted"
        assert said in again.stderr
        assert again.stdout.splitlines()[-1] == f"version: {version}  (published)"
    assert (root / "LATEST").read_bytes() == latest
    assert _versions(root) == [night_1.name, night_2.name]
    shutil.move(tmp_path / "away", tmp_path / "images")
    other = _convert(manifest, root, "--run_key", "night-3")
    assert other.returncode == 0 and len(_versions(root)) == 3


@pytest.mark.parametrize("runner", [[], BEAM], ids=["local", "beam"])
def test_each_runner_looks_for_the_key_before_reading_an_image(tmp_path, capsys, runner):
    rows = make_images(tmp_path, per_class=2)
    manifest, root = write_manifest(tmp_path / "m.csv", rows), tmp_path / "out"
    argv = ["convert", "--manifest", str(manifest), "--output", str(root), "--no_progress"]
    assert main([*argv, "--run_key", "k", *runner]) == 0
    shutil.rmtree(tmp_path / "images")
    before = _versions(root)
    assert main([*argv, "--run_key", "k", *runner]) == 0
    assert "published already" in capsys.readouterr().err and _versions(root) == before


DAMAGES = {
    "truncated": lambda text: text[: len(text) // 2],
    "not json": lambda text: "\x00\xff binary",
    "a list": lambda text: "[]",
    "no splits": lambda text: json.dumps({**json.loads(text), "splits": None}),
    "options a list": lambda text: json.dumps({**json.loads(text), "options": []}),
    "a folder": None,
    "missing": None,
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_an_older_versions_damaged_metadata_leaves_its_key_unknown_and_the_night_goes_on(
    tmp_path, capsys, damage
):
    """One damaged old file made every run given a new key exit 1 with a traceback: the
    nightly DAG passes a key every night, so it stopped every night."""
    rows = make_images(tmp_path, per_class=2)
    manifest, root = write_manifest(tmp_path / "m.csv", rows), tmp_path / "out"
    argv = ["convert", "--manifest", str(manifest), "--output", str(root), "--no_progress"]
    assert main([*argv, "--run_key", "night-1"]) == 0
    assert main([*argv, "--run_key", "night-2"]) == 0
    old = Path(root, VERSIONS, _versions(root)[0], "tfrecord_pipeline.json")
    old_text = old.read_text()
    old.unlink()
    if damage == "a folder":
        old.mkdir()
    elif damage != "missing":
        old.write_bytes(DAMAGES[damage](old_text).encode("utf-8", "surrogateescape"))
    capsys.readouterr()
    assert main([*argv, "--run_key", "night-2"]) == 0  # found before the damaged one
    assert "published already" in capsys.readouterr().err
    assert main([*argv, "--run_key", "night-3"]) == 0
    err = capsys.readouterr().err
    assert err.count(f"{old.parent.name} (") == 1 and "Traceback" not in err
    assert "whether it was run with --run_key night-3 is unknown" in err
    assert len(_versions(root)) == 3


def test_on_the_bucket_and_a_retried_dataflow_launch(tmp_path, gcs, capsys):
    """A key on gs://, and a Dataflow launch (built, not submitted) whose key was published:
    no job is built."""
    rows = make_images(tmp_path, per_class=2)
    write_manifest(tmp_path / "m.csv", rows)
    source = gcs(tmp_path, f"{tmp_path.name}-in")
    root = f"gs://tfrp-test/{tmp_path.name}-out"
    argv = ["convert", "--manifest", f"{source}/m.csv", "--output", root, "--no_progress"]
    assert main([*argv, "--run_key", "scheduled__1"]) == 0
    (version,) = _versions(root)
    assert read_info(fileio.join(root, VERSIONS, version)).options["run_key"] == "scheduled__1"
    capsys.readouterr()
    for runner in ([], DATAFLOW):
        assert main([*argv, "--run_key", "scheduled__1", *runner]) == 0
        out, err = capsys.readouterr()
        assert f"published already, as {version}" in err and "Dataflow job" not in out
    assert _versions(root) == [version]
    assert main([*argv, "--run_key", "scheduled__2"]) == 0 and len(_versions(root)) == 2


def test_two_attempts_of_one_key_at_once_publish_once(tmp_path):
    """The second attempt starts while the first runs and publishes first: the first loses
    (exit 4), and its retry finds the key published."""
    rows = make_images(tmp_path, per_class=2)
    manifest, root = write_manifest(tmp_path / "m.csv", rows), tmp_path / "out"
    assert _convert(manifest, root, "--run_key", "night-0").returncode == 0
    (tmp_path / "overlapped.py").write_text(OVERLAPPED)
    argv = ["convert", "--manifest", manifest, "--output", root, "--run_key", "night-1"]
    script = [sys.executable, tmp_path / "overlapped.py", tmp_path / "flag", *argv]
    first = subprocess.run(list(map(str, script)), capture_output=True, text=True)
    assert first.returncode == 4, first.stderr
    retry = command(*argv)
    assert retry.returncode == 0 and "published already" in retry.stderr
    keys = [read_info(str(root / VERSIONS / v)).options["run_key"] for v in _versions(root)]
    assert keys == ["night-0", "night-1"]
    assert json.loads((root / "LATEST").read_text())["version"] == _versions(root)[-1]
