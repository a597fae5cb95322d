"""Rollback is a command, and a publication like any other: `tfrecord-pipeline rollback ROOT --to
VERSION` publishes an older complete version in the pointer's atomic write and says what it
replaced; version numbers are never reused; retention counts versions in publication order and a
clean-up never deletes a once-published version; a run started before a rollback (or before
LATEST was written by hand) loses with exit 4. Real runs into real folders, and a bucket."""

import shutil
from pathlib import Path

import pytest
from conftest import make_images, published, write_manifest

from tfrecord_pipeline.cli.main import EXIT_OK, EXIT_USER_ERROR, main
from tfrecord_pipeline.config.arguments import parse_args
from tfrecord_pipeline.config.conversion import prepare
from tfrecord_pipeline.dataset import publish
from tfrecord_pipeline.dataset.commit import cleaned_up_on_failure
from tfrecord_pipeline.dataset.metadata import INFO_FILE
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
        assert f"{version} is damaged: 1 of its 2 shards ({shard})" in said, said
        assert said.endswith("it cannot be published (see verify)"), said
    assert published(root).name == made[2] and verify(str(root)) == (8, [])
    (new,) = _runs(small, root, 1, "--write_index")  # nothing was recorded: numbering goes on
    assert new.startswith("v000004-")


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
