"""Rollback is a command, and a publication like any other: `tfrecord-pipeline rollback ROOT --to
VERSION` publishes an older complete version in the pointer's atomic write and says what it
replaced; version numbers are never reused; retention counts versions in publication order and a
clean-up never deletes a once-published version; a run started before a rollback (or before
LATEST was written by hand) loses with exit 4. Real runs into real folders, and a bucket."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPOSITORY, make_images, published, write_manifest

from tfrecord_pipeline.cli.main import EXIT_OK, EXIT_SUPERSEDED, EXIT_USER_ERROR, main
from tfrecord_pipeline.config.arguments import parse_args
from tfrecord_pipeline.config.conversion import prepare
from tfrecord_pipeline.dataset import publish
from tfrecord_pipeline.dataset.commit import cleaned_up_on_failure
from tfrecord_pipeline.dataset.metadata import INFO_FILE
from tfrecord_pipeline.dataset.retention import clean_up
from tfrecord_pipeline.dataset.versions import (
    MARKER,
    POINTER,
    PUBLISHED,
    VERSIONS,
    Pointer,
    metadata_digest,
)
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.runners.local import convert_here
from tfrecord_pipeline.transforms.progress import UNWATCHED


@pytest.fixture
def small(tmp_path) -> Path:
    return write_manifest(tmp_path / "small.csv", make_images(tmp_path, per_class=2))


def _argv(small: Path, root, *flags: str) -> list[str]:
    return ["convert", "--manifest", str(small), "--output", str(root), "--no_progress", *flags]


def _runs(small: Path, root, count: int, *flags: str) -> list[str]:
    """`count` runs one after another; the versions they published."""
    made = []
    for _ in range(count):
        assert main(_argv(small, root, "--num_shards", "2", *flags)) == EXIT_OK
        made.append(published(root).name)
    return made


def _versions(root: Path) -> list[str]:
    return sorted(path.name for path in (root / VERSIONS).iterdir())


def _rollback(root, version: str, capsys) -> tuple[int, str]:
    capsys.readouterr()
    status = main(["rollback", str(root), "--to", version])
    out, err = capsys.readouterr()
    return status, (out + err).strip()


def test_a_rollback_publishes_an_older_version_and_says_what_it_replaced(tmp_path, small, capsys):
    root = tmp_path / "root"
    made = _runs(small, root, 3)
    status, said = _rollback(root, made[0], capsys)
    assert status == EXIT_OK and said == f"{root}: published {made[0]}, replacing {made[2]}"
    assert published(root).name == made[0] and verify(str(root)) == (8, [])
    assert _rollback(root, "2", capsys) == (
        EXIT_OK,
        f"{root}: published {made[1]}, replacing {made[0]}",
    )
    assert (
        _rollback(root, "v000002", capsys)[1]
        == f"{root}: {made[1]} is the published version already"
    )
    # The next run numbers after the highest version ever published, and keeps every version.
    (new,) = _runs(small, root, 1)
    assert new.startswith("v000004-") and _versions(root) == sorted([*made, new])


def test_to_previous_goes_back_a_version_at_a_time_on_a_root_numbered_from_any_number(
    tmp_path, small, capsys
):
    """`--to previous`: the newest version numbered below the published one and published
    once, so a second one goes further back (not forward to the version just replaced). The
    README's `--to 1` failed on a root whose first kept version was not v000001."""
    root = tmp_path / "root"
    made = _runs(small, root, 4, "--keep_versions", "3")  # v000001 deleted: v2, v3, v4 kept
    (root / VERSIONS / made[1] / MARKER).unlink()  # v2 incomplete now: passed over
    assert _rollback(root, "previous", capsys) == (
        EXIT_OK,
        f"{root}: published {made[2]}, replacing {made[3]}",
    )
    status, said = _rollback(root, "previous", capsys)
    assert status == EXIT_USER_ERROR
    assert said.endswith(
        f"keeps no complete version published before {made[2]}: nothing to roll back to"
    )


def test_retention_counts_versions_in_publication_order(tmp_path, small, capsys):
    root = tmp_path / "root"
    made = _runs(small, root, 3)
    assert _rollback(root, made[0], capsys)[0] == EXIT_OK
    (new,) = _runs(small, root, 1, "--keep_versions", "2")
    # v1 was published after v2 and v3: it is the one kept beside the new version.
    assert _versions(root) == [made[0], new]
    assert verify(str(root / VERSIONS / made[0])) == (8, [])


@pytest.mark.parametrize("how", ["command", "by-hand"])
def test_a_run_started_before_a_rollback_loses_and_deletes_no_published_version(
    tmp_path, small, capsys, how
):
    """A run started from v1; v2 was published, then v1 again (a rollback, or LATEST copied
    back by hand): the run's version would be numbered as v2 and publish over what v2's run
    replaced. It loses (exit 4) and its clean-up deletes nothing published."""
    root = tmp_path / "root"
    (first,) = _runs(small, root, 1)
    old_pointer = (root / POINTER).read_bytes()
    conversion = prepare(*parse_args(_argv(small, root, "--num_shards", "2")[1:]))
    target = publish.start(str(root))  # the run starts here...
    (second,) = _runs(small, root, 1)  # ... another publishes v2 ...
    if how == "command":  # ... and v1 is published again
        assert _rollback(root, first, capsys)[0] == EXIT_OK
    else:
        (root / POINTER).write_bytes(old_pointer)
    assert target.version[:8] == second[:8]  # the same number
    other = first if how == "command" else second  # the last publication recorded
    said = f"another run published {other} in .* rerun to convert again from {first}$"
    lost = pytest.raises(publish.SupersededError, match=said)
    with lost, cleaned_up_on_failure(target):
        convert_here(conversion, target, UNWATCHED)
    assert _versions(root) == [first, second] and published(root).name == first
    assert verify(str(root / VERSIONS / second)) == (8, [])
    (new,) = _runs(small, root, 1, "--keep_versions", "3")
    assert new.startswith("v000003-") and _versions(root) == [first, second, new]


def test_latest_written_by_hand_is_taken_for_a_rollback(tmp_path, small):
    """Even in a dataset of an older release (no publication records): pointing LATEST at v1
    by hand, the next run numbers after v3 and no clean-up takes v2 or v3 for a run that lost."""
    root = tmp_path / "root"
    made = _runs(small, root, 3)
    shutil.rmtree(root / PUBLISHED)
    info = (root / VERSIONS / made[0] / INFO_FILE).read_bytes()
    (root / POINTER).write_bytes(Pointer(made[0], metadata_digest(info)).to_bytes())
    (new,) = _runs(small, root, 1)
    assert new.startswith("v000004-") and _versions(root) == sorted([*made, new])
    (newer,) = _runs(small, root, 1, "--keep_versions", "3")
    assert _versions(root) == sorted([made[0], new, newer])  # v1 published after v2 and v3


def test_a_version_a_rollback_cannot_publish_is_one_line_exit_2(tmp_path, small, capsys):
    root = tmp_path / "root"
    made = _runs(small, root, 2)
    (root / VERSIONS / made[0] / MARKER).unlink()
    cases = {
        "v000009": "has no version 'v000009'",
        made[0]: "is not complete",
        "nonsense": "has no version 'nonsense'",
    }
    for version, says in cases.items():
        status, said = _rollback(root, version, capsys)
        assert status == EXIT_USER_ERROR and said.startswith("tfrecord-pipeline: error: ")
        assert says in said and len(said.splitlines()) == 1, said
    for folder in (tmp_path / "not-there", tmp_path, small):  # none, a folder, a file
        status, said = _rollback(folder, "1", capsys)
        assert status == EXIT_USER_ERROR and "is not a dataset root" in said, said
    (tmp_path / "odd" / POINTER).mkdir(parents=True)
    status, said = _rollback(tmp_path / "odd", "1", capsys)
    assert status == EXIT_USER_ERROR and said.endswith(
        f"{POINTER} is not a file, as a dataset's layout has it"
    )
    assert published(root).name == made[1]


def test_a_version_whose_shards_changed_since_it_was_published_is_never_published_again(
    tmp_path, small, capsys
):
    root = tmp_path / "root"
    made = _runs(small, root, 3, "--write_index")
    flipped = sorted((root / VERSIONS / made[0]).glob("train-*.tfrecord"))[0]
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01  # a byte changed: size, marker and metadata as they were
    flipped.write_bytes(bytes(data))
    deleted = sorted((root / VERSIONS / made[1]).glob("train-*.tfrecord"))[-1]
    deleted.unlink()
    for version, shard in ((made[0], flipped.name), (made[1], deleted.name)):
        status, said = _rollback(root, version, capsys)
        assert status == EXIT_USER_ERROR and len(said.splitlines()) == 1, said
        assert f"{version} is damaged ({shard}: size, CRC-32C or index differs" in said, said
        assert said.endswith("it cannot be published (see verify)"), said
    assert published(root).name == made[2] and verify(str(root)) == (8, [])
    (new,) = _runs(small, root, 1, "--write_index")  # nothing was recorded: numbering goes on
    assert new.startswith("v000004-")


ERRORS_FILE = "errors/errors-00000-of-00001.jsonl"
DAMAGE = {  # how a file besides the shards is damaged → what verify and the rollback say
    "dataset_info.json gone": ("dataset_info.json", None, "dataset_info.json: missing"),
    "errors file gone": (ERRORS_FILE, None, f"{ERRORS_FILE}: missing"),
    "errors file cut": (ERRORS_FILE, b"", f"{ERRORS_FILE}: size or CRC-32C differs"),
    # Its lines all there, one byte changed: only its size and CRC-32C in the metadata tell.
    "errors file changed": (
        ERRORS_FILE,
        lambda data: data.replace(b"no.jpg", b"no.jpx"),
        f"{ERRORS_FILE}: size or CRC-32C differs from {INFO_FILE}",
    ),
    "labels.txt changed": ("labels.txt", b"x\n", f"labels.txt: differs from what {INFO_FILE}"),
    "labels.txt gone": ("labels.txt", None, "labels.txt: missing"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_version_with_any_file_its_metadata_names_damaged_is_never_published_again(
    tmp_path, small, capsys, damage
):
    """Found by a hostile tester: a rollback checked only shards and their indexes, so it
    published (exit 0) a version without TFDS's dataset_info.json or an errors file, which
    verify then refused and tfds.builder_from_directory could not read. It checks what verify
    checks: each is one line, exit 2, naming the file, and LATEST as it was."""
    rows = [*make_images(tmp_path, per_class=2), {"image_uri": "no.jpg", "label": "astronaut"}]
    manifest = write_manifest(tmp_path / "one-bad.csv", rows)
    root = tmp_path / "root"
    made = _runs(manifest, root, 2, "--max_error_rate", "0.5")
    name, data, says = DAMAGE[damage]
    damaged = root / VERSIONS / made[0] / name
    if data is None:
        damaged.unlink()
    else:
        damaged.write_bytes(data(damaged.read_bytes()) if callable(data) else data)
    assert says in "\n".join(verify(str(root / VERSIONS / made[0]))[1])  # verify refuses it
    latest = (root / POINTER).read_bytes()
    status, said = _rollback(root, made[0], capsys)
    assert status == EXIT_USER_ERROR and len(said.splitlines()) == 1, said
    assert f"{made[0]} is damaged ({says}" in said, said
    assert (root / POINTER).read_bytes() == latest and verify(str(root))[1] == []


# A rollback that stops itself (SIGSTOP) when it first makes the call an audit event names, on
# a path ending as given: a point between two of its checks, with nothing of it replaced.
_STOPPING_ROLLBACK = """
import os, signal, sys
event, ending = sys.argv.pop(1), sys.argv.pop(1)
def stop(name, args):
    if name == event and str(args[0]).endswith(ending) and not stop.done:
        stop.done = True
        os.kill(os.getpid(), signal.SIGSTOP)
stop.done = False
sys.addaudithook(stop)
from tfrecord_pipeline.cli.main import main
sys.exit(main(["rollback", *sys.argv[1:]]))
"""
PAUSES = {  # where the rollback is stopped → what it said before the fix, each with exit 2
    "listing versions": ("os.listdir", f"/{VERSIONS}"),  # "ROOT has no version '1'"
    "reading the marker": ("open", f"/{MARKER}"),  # "... holds no published dataset"
    "checking shards": ("open", ".tfrecord"),  # "... is damaged: 2 of its 2 shards"
}


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.slow
@pytest.mark.parametrize("pause", PAUSES)
@pytest.mark.parametrize("meanwhile", ["publishes", "cleans up"])
def test_a_rollback_whose_version_retention_deleted_while_it_was_checked_exits_4(
    tmp_path, meanwhile, pause
):
    """Found by a hostile tester (3 races in 130): a rollback racing `convert --keep_versions`
    whose retention deleted the version being checked said it was "not complete" (exit 2),
    where another run changing the dataset meanwhile is status 4. Real processes: rollback R
    to v1 is stopped between two of its checks; meanwhile another run publishes and deletes v1
    by its --keep_versions, or (having published before R began) its retention deletes v1.
    R goes on and finds v1 gone, wherever it was stopped: exit 4, one line, LATEST kept."""
    root = tmp_path / "root"
    manifest = str(REPOSITORY / "sample" / "manifest.csv")
    convert = [sys.executable, "-m", "tfrecord_pipeline.cli.main", "convert", "--manifest"]
    convert += [manifest, "--output", str(root), "--no_progress", "--num_shards", "2"]
    for _ in range(2 if meanwhile == "publishes" else 3):
        assert subprocess.run(convert, capture_output=True).returncode == EXIT_OK
    (first,) = [name for name in _versions(root) if name.startswith("v000001-")]
    rollback = subprocess.Popen(
        [sys.executable, "-c", _STOPPING_ROLLBACK, *PAUSES[pause], str(root), "--to", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not _stopped(rollback.pid):
        assert rollback.poll() is None, rollback.communicate()
        time.sleep(0.05)
    if meanwhile == "publishes":
        ran = subprocess.run([*convert, "--keep_versions", "1"], capture_output=True)
        assert ran.returncode == EXIT_OK, ran.stderr
    else:
        clean_up(str(root), publish.read_pointer(str(root))[0], keep_versions=1)
    assert first not in _versions(root)
    latest = (root / POINTER).read_bytes()
    os.kill(rollback.pid, signal.SIGCONT)
    out, err = rollback.communicate(timeout=600)
    assert rollback.returncode == EXIT_SUPERSEDED, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    said = f"(its --keep_versions) in {root} while this rollback to 1 ran, so it changed nothing"
    assert said in err and f"deleted {first}" in err, err
    assert ("another run published" in err) == (meanwhile == "publishes"), err
    assert (root / POINTER).read_bytes() == latest and verify(str(root))[1] == []


@pytest.mark.slow
def test_a_rollback_in_a_bucket_is_a_publication_a_run_started_before_loses_to(
    tmp_path, small, gcs, faulty_gcs, capsys
):
    """Through the proxy that answers conditional uploads as Cloud Storage does: the rollback
    publishes, a run started before it loses, and so does one started before LATEST was
    rewritten (here with the very same bytes: only its generation tells)."""
    faulty_gcs(f"{tmp_path.name}/")
    root = f"gs://tfrp-test/{tmp_path.name}"
    made = []
    for _ in range(2):
        assert main(_argv(small, root, "--num_shards", "2")) == EXIT_OK
        made.append(publish.read_pointer(root)[0].version)
    running = publish.start(root)  # a run started before the rollback
    latest = gcs.bucket.get_blob(f"{tmp_path.name}/{POINTER}").generation
    errors = gcs.bucket.blob(f"{tmp_path.name}/{VERSIONS}/{made[0]}/{ERRORS_FILE}")
    kept = errors.download_as_bytes()
    errors.delete()  # a version with a file its metadata names gone is never published again
    status, said = _rollback(root, "1", capsys)
    assert status == EXIT_USER_ERROR and f"{made[0]} is damaged ({ERRORS_FILE}: missing" in said
    assert gcs.bucket.get_blob(f"{tmp_path.name}/{POINTER}").generation == latest
    errors.upload_from_string(kept)
    status, said = _rollback(root, "1", capsys)
    assert status == EXIT_OK and said == f"{root}: published {made[0]}, replacing {made[1]}"
    assert publish.read_pointer(root)[0].version == made[0] and verify(root) == (8, [])
    with pytest.raises(publish.SupersededError):
        publish.publish(running, Pointer(running.version, "0" * 64))
    running = publish.start(root)
    pointer = gcs.bucket.blob(f"{tmp_path.name}/{POINTER}")
    pointer.upload_from_string(pointer.download_as_bytes())  # the same bytes, by hand
    with pytest.raises(publish.SupersededError):
        publish.publish(running, Pointer(running.version, "0" * 64))
    assert main(_argv(small, root, "--num_shards", "2")) == EXIT_OK
    assert publish.read_pointer(root)[0].version.startswith("v000003-")
