"""The commit step at the unit tier, on a local dataset root: what it moves, writes and
publishes given its inputs, what it leaves unpublished when the gates fail, what a retry
changes (nothing), and what a failed run leaves behind."""

import json
from pathlib import Path

import pytest

from tfrecord_pipeline.dataset import publish, versions
from tfrecord_pipeline.dataset.commit import (
    CommitConfig,
    cleaned_up_on_failure,
    commit_dataset,
    read_info,
    staged_files,
    write_version_files,
)
from tfrecord_pipeline.dataset.metadata import INFO_FILE, LABELS_FILE
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.stages import PublishInputs
from tfrecord_pipeline.transforms.tfrecord.records import crc32c_of
from tfrecord_pipeline.transforms.write.error_files import (
    ErrorCounts,
    ErrorFileResult,
    error_file_name,
)
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult

SHARD = "train-00000-of-00001.tfrecord"
ERRORS = error_file_name(0, 1)


def _result(records: int = 3, **extra) -> ShardResult:
    return ShardResult("train", 0, 1, SHARD, records, 10, "crc", ((0, records),), **extra)


CAT = LabelMap(("cat",))


def _staged(root: Path, errors: int = 0, labels: LabelMap = CAT):
    """A run started in `root` whose one shard and one errors file are in its staging folder,
    and what its commit step receives."""
    target = publish.start(str(root))
    staging = Path(target.staging)
    staging.mkdir(parents=True)
    (staging / "shard-attempt").write_bytes(b"records")
    (staging / "errors-attempt").write_bytes(b"{}\n" * errors)
    written = (3 * errors, crc32c_of(b"{}\n" * errors))
    plan = DatasetPlan(labels, (("train", 3 + errors),), (("train", 1),))
    counts = ErrorCounts((("train", "missing_file", errors),) if errors else ())
    files = [ErrorFileResult(ERRORS, "errors-attempt", errors, *written)]
    return target, PublishInputs(plan, [_result(staged="shard-attempt")], files, counts, skipped=0)


def _commit(target, max_error_rate: float = 0.0, keep_versions: int = 0) -> CommitConfig:
    return CommitConfig(target, {"compression": "none"}, "9.9", max_error_rate, keep_versions)


def test_staged_files_name_every_file_of_the_received_results_and_no_other():
    results = [
        _result(staged="a"),
        _result(staged="b", index_file="train.idx", rows_file="train.rows")._replace(file="t1"),
    ]
    errors = [ErrorFileResult(ERRORS, "e", 2, 0, "")]
    assert staged_files(results, errors) == [
        ("e", ERRORS),
        ("a", SHARD),
        ("b", "t1"),
        ("b.idx", "train.idx"),
        ("b.rows", "train.rows"),
    ]
    assert staged_files([], []) == []


def test_a_run_that_passes_its_gates_is_moved_in_marked_and_published(tmp_path):
    target, inputs = _staged(tmp_path / "root")
    info = commit_dataset(_commit(target), inputs)
    version = Path(target.folder)
    info_bytes = (version / INFO_FILE).read_bytes()
    assert info.failures == [] and read_info(target.folder) == info
    assert (version / SHARD).read_bytes() == b"records" and (version / ERRORS).read_bytes() == b""
    assert (version / LABELS_FILE).read_text() == "cat\n"
    assert (version / versions.MARKER).read_bytes() == versions.marker_bytes(info_bytes)
    pointer, _ = publish.read_pointer(target.root)
    assert pointer == versions.Pointer(target.version, versions.metadata_digest(info_bytes))
    assert versions.resolve(target.root).folder == target.folder
    assert not Path(target.staging).exists()


def test_a_run_stopped_by_its_gates_keeps_its_files_for_a_look_and_publishes_nothing(tmp_path):
    target, inputs = _staged(tmp_path / "root", errors=1)  # 1 of 4 rows over a rate of 0
    info = commit_dataset(_commit(target), inputs)
    version = Path(target.folder)
    assert info.failures and read_info(target.folder).failures == info.failures
    assert (version / SHARD).exists() and (version / ERRORS).read_bytes() == b"{}\n"
    assert not (version / versions.MARKER).exists()
    assert publish.read_pointer(target.root) == (None, 0)
    assert not Path(target.staging).exists()


def test_integer_labels_write_an_empty_labels_file(tmp_path):
    target, inputs = _staged(tmp_path / "root", labels=LabelMap((), integers=True))
    commit_dataset(_commit(target), inputs)
    assert (Path(target.folder) / LABELS_FILE).read_bytes() == b""


def test_a_retried_commit_after_publishing_changes_nothing(tmp_path):
    """Beam may run the commit step again after it published: the second run finds its own
    version published and only repeats the clean-up."""
    target, inputs = _staged(tmp_path / "root")
    first = commit_dataset(_commit(target), inputs)
    before = {p: p.read_bytes() for p in Path(target.root).rglob("*") if p.is_file()}
    assert commit_dataset(_commit(target), inputs) == first
    assert {p: p.read_bytes() for p in Path(target.root).rglob("*") if p.is_file()} == before


def test_publishing_cleans_up_what_no_run_can_publish_and_keeps_k_versions(tmp_path):
    root = tmp_path / "root"
    for _ in range(3):  # three published versions, one after another
        target, inputs = _staged(root)
        commit_dataset(_commit(target), inputs)
    older = sorted(p.name for p in (root / versions.VERSIONS).iterdir())
    unfinished = publish.start(str(root))  # started from the third, never committed
    Path(unfinished.staging).mkdir(parents=True)
    target, inputs = _staged(root)  # a run started from the third too
    commit_dataset(_commit(target, keep_versions=2), inputs)
    assert sorted(p.name for p in (root / versions.VERSIONS).iterdir()) == [
        older[2],
        target.version,
    ]
    assert list((root / versions.STAGING).iterdir()) == []


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_version_files_are_the_labels_the_metadata_and_tfds_files_when_tfds_can_read_them(
    tmp_path, compression
):
    target, inputs = _staged(tmp_path / "root")
    info = commit_dataset(_commit(target, max_error_rate=1), inputs)
    info.compression = compression
    folder = tmp_path / "version"
    info_bytes = write_version_files(str(folder), info, ["cat"])
    assert info_bytes == (folder / INFO_FILE).read_bytes() == info.to_json().encode()
    assert (folder / LABELS_FILE).read_text() == "cat\n"  # the names given, not in the metadata
    assert "names" not in json.loads(info_bytes)["labels"]
    tfds = {"dataset_info.json", "features.json", "image.class.label.labels.txt"}
    tfds = tfds if compression == "none" else set()  # TFDS reads no gzip shards
    assert {p.name for p in folder.iterdir()} - {INFO_FILE, LABELS_FILE} == tfds
    if tfds:
        assert json.loads((folder / "dataset_info.json").read_bytes())["splits"][0]["name"] == (
            "train"
        )


def _failing_run(tmp_path, error: BaseException, publish_meanwhile: bool = False):
    """A run whose work fails with `error` once it has staged files; optionally another run
    started from the same version publishes first."""
    root = tmp_path / "root"
    target, _ = _staged(root)
    Path(target.folder).mkdir(parents=True)
    if publish_meanwhile:
        other, inputs = _staged(root)
        commit_dataset(_commit(other), inputs)
    with cleaned_up_on_failure(target):
        raise error


@pytest.mark.parametrize(
    ("error", "publish_meanwhile", "raised"),
    [
        (ValueError("a bug"), False, ValueError),
        (KeyboardInterrupt(), False, KeyboardInterrupt),
        (ValueError("a bug"), True, publish.SupersededError),  # the race, not what followed from it
        (KeyboardInterrupt(), True, KeyboardInterrupt),  # Ctrl-C is what the user is told
        (publish.SupersededError("lost"), True, publish.SupersededError),
    ],
)
def test_a_failed_run_deletes_its_own_folders_and_says_why(
    tmp_path, error, publish_meanwhile, raised
):
    with pytest.raises(raised) as caught:
        _failing_run(tmp_path, error, publish_meanwhile)
    assert (caught.value is error) == (raised is type(error))
    assert (caught.value.__cause__ is error) == (raised is not type(error))
    root = tmp_path / "root"
    published = publish.read_pointer(str(root))[0]
    left = {p.name for p in (root / versions.VERSIONS).iterdir()}
    assert left == ({published.version} if published else set())
    assert list((root / versions.STAGING).iterdir()) == []


def test_a_user_error_comes_before_any_work_and_deletes_nothing(tmp_path):
    target, _ = _staged(tmp_path / "root")
    with pytest.raises(UserError, match="bad flag"), cleaned_up_on_failure(target):
        raise UserError("bad flag")
    assert (Path(target.staging) / "shard-attempt").exists()
