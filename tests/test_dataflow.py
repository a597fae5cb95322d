"""The real Dataflow job, built and not submitted (--dry_run, staging on the GCS emulator)."""

import ast
from pathlib import Path

import pytest
from apache_beam.portability.api import beam_runner_api_pb2
from conftest import BEAM, arguments, make_images, write_manifest

from tfrecord_pipeline.cli.job import counters
from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.cli.summary import format_counters
from tfrecord_pipeline.config.arguments import parse_args
from tfrecord_pipeline.config.conversion import prepare
from tfrecord_pipeline.dataset.publish import start
from tfrecord_pipeline.runners.beam_pipeline import launch
from tfrecord_pipeline.runners.convert import run

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
GBK = "beam:transform:group_by_key:v1"
# Error rows are shuffled after the shard writer (which rejects rows too): to be counted, and
# grouped by errors file. The only shuffles downstream of the writer.
ERROR_ROW_PRODUCERS = {"WriteErrors/CountErrors/KeyWithVoid", "WriteErrors/AddEmptyFiles"}
PARDO = "beam:transform:pardo:v1"
# Every GroupByKey must be fed by one of these row-level steps: never by image bytes.
ROW_LEVEL_PRODUCERS = {
    "PlanDataset/CollectStats/KeyWithVoid",
    "CountSkippedFiles/CombineGlobally(CountCombineFn)/KeyWithVoid",
    "CountDroppedNegatives/CombineGlobally(CountCombineFn)/KeyWithVoid",
    "WriteShards/AddEmptyShards",
    "DropDuplicateContent/DigestContent",
    *ERROR_ROW_PRODUCERS,
}
# Downstream of the shard writer, one shuffle: the results of a shard's pieces, by shard (a few
# hundred bytes a piece), for the step that joins them.
PIECE_RESULTS_PRODUCER = "WriteShards/KeyPieceByShard"
# A refresh adds shuffles of manifest rows with their fingerprints, of the published records'
# keys and positions, and of kept positions by shard.
REFRESH_PRODUCERS = {
    "RefreshRows/MatchByKey/CoGroupByKeyImpl/Flatten",  # (key, row + fingerprint | position)
    "RefreshRows/KeepOrConvert/FlatMap(_keep_or_convert)",  # (shard file, kept position)
    "RefreshRows/CountBySplit/SplitOfEachRow",  # (split, 1)
    "RefreshRows/DamagedArchives/ToPairs",  # (archive name, True): a carried one's, damaged
}


def _dataflow_flags(bucket: str, *extra: str) -> list[str]:
    dataflow = arguments(
        "--runner=DataflowRunner --dry_run=True --no_auth --project=test-project"
        " --region=us-central1 --temp_location={bucket}/tmp --setup_file={root}/setup.py",
        bucket=bucket,
        root=ROOT,
    )
    return [*dataflow, *extra]


@pytest.fixture
def job_graph(tmp_path, gcs):
    write_manifest(tmp_path / "manifest.csv", make_images(tmp_path, per_class=1))
    source = gcs(tmp_path, "dataflow-in")

    def build(*extra):
        argv = ["--manifest", f"{source}/manifest.csv", "--output", "gs://tfrp-test/df-out"]
        conversion = prepare(*parse_args([*argv, *_dataflow_flags("gs://tfrp-test", *extra)]))
        target = start(conversion.options.output)
        return launch(conversion, target).job.proto_pipeline.components

    return build


def _producer(components, pcollection: str) -> str:
    for transform in components.transforms.values():
        if pcollection in transform.outputs.values() and not transform.subtransforms:
            return transform.unique_name
    raise AssertionError(pcollection)


def _shuffled_after(components, start: str) -> set[str]:
    """The producers of what each GroupByKey downstream of `start` shuffles."""
    downstream = _downstream(components, start)
    return {
        _producer(components, next(iter(t.inputs.values())))
        for t in components.transforms.values()
        if t.spec.urn == GBK and t.unique_name in downstream
    }


def _downstream(components, start: str) -> set[str]:
    """Unique names of every transform that consumes, directly or not, `start`'s outputs."""
    leaves = [t for t in components.transforms.values() if not t.subtransforms]
    frontier = set(next(t for t in leaves if t.unique_name == start).outputs.values())
    seen: set[str] = set()
    while frontier:
        consumers = [t for t in leaves if frontier & set(t.inputs.values())]
        frontier = set()
        for transform in consumers:
            if transform.unique_name not in seen:
                seen.add(transform.unique_name)
                frontier |= set(transform.outputs.values())
    return seen


def test_job_graph_shuffles_rows_never_image_bytes(job_graph):
    components = job_graph("--dedup", "--sdk_container_image=gcr.io/test/tfrp:1")
    names = {t.unique_name for t in components.transforms.values()}
    for stage in (
        "ReadManifests",
        "PlanDataset",
        "AssignShards",
        "WriteShards",
        "DropDuplicateContent",
        "CollectErrors",
        "WriteErrors",
        "CommitDataset",
    ):
        assert stage in names
    shuffles = [t for t in components.transforms.values() if t.spec.urn == GBK]
    producers = {_producer(components, next(iter(t.inputs.values()))) for t in shuffles}
    assert producers == ROW_LEVEL_PRODUCERS | {PIECE_RESULTS_PRODUCER}
    writer = next(n for n in names if n.startswith("WriteShards/WriteShard/ParDo"))
    shuffled = _shuffled_after(components, writer)
    assert shuffled == ERROR_ROW_PRODUCERS | {PIECE_RESULTS_PRODUCER}
    (environment,) = components.environments.values()
    assert b"gcr.io/test/tfrp:1" in environment.payload
    staged = b"".join(d.role_payload for d in environment.dependencies)
    assert b"workflow.tar.gz" in staged  # the sdist of setup.py, installed on every worker


def test_the_manifest_is_read_on_the_workers_in_splittable_pieces(job_graph):
    """The Dataflow job reads each manifest file with a splittable DoFn: its restriction, a
    byte range, is split into pieces that workers read apart (and split further as they go);
    what it is given is one element per file, the launcher's description of it."""
    components = job_graph()
    leaves = [t for t in components.transforms.values() if not t.subtransforms]
    (read,) = [t for t in leaves if t.unique_name.startswith("ReadManifests/ReadPieces/")]
    assert read.spec.urn == PARDO
    payload = beam_runner_api_pb2.ParDoPayload.FromString(read.spec.payload)
    assert payload.restriction_coder_id, "the manifest read is not splittable"
    (files,) = read.inputs.values()
    assert _producer(components, files).startswith("ReadManifests/ListManifestFiles/")


def test_cli_on_dataflow_builds_the_job_and_says_so(tmp_path, gcs, capsys):
    write_manifest(tmp_path / "manifest.csv", make_images(tmp_path, per_class=1))
    source = gcs(tmp_path, "cli-in")
    argv = ["convert", "--manifest", f"{source}/manifest.csv", "--output", "gs://tfrp-test/cli"]
    assert main([*argv, *_dataflow_flags("gs://tfrp-test"), "--wait"]) == 0
    assert "dry run" in capsys.readouterr().out


def test_counters_after_a_run(tmp_path):
    rows = make_images(tmp_path, per_class=1) + [{"image_uri": "gone.jpg", "label": "x"}]
    manifest = write_manifest(tmp_path / "m.csv", rows)
    argv = ["--manifest", str(manifest), "--output", str(tmp_path / "o"), "--max_error_rate", "1"]
    conversion = prepare(*parse_args([*argv, *BEAM]))
    result = launch(conversion, start(conversion.options.output))
    result.wait_until_finish()
    counted = counters(result)
    assert counted["rows"] == 5 and counted["records"] == 4
    assert "errors: 1 (missing_file 1)" in format_counters(counted)


def test_workers_never_install_tensorflow():
    setup = ast.parse((ROOT / "setup.py").read_text())
    call = next(
        n
        for n in ast.walk(setup)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup"
    )
    requires = next(k.value for k in call.keywords if k.arg == "install_requires")
    assert not any("tensorflow" in ast.literal_eval(r) for r in requires.elts)


def test_a_refresh_job_shuffles_keys_and_positions_never_image_bytes(tmp_path, gcs):
    write_manifest(tmp_path / "manifest.csv", make_images(tmp_path, per_class=1))
    source = gcs(tmp_path, "refresh-in")
    argv = ["--manifest", f"{source}/manifest.csv", "--output", "gs://tfrp-test/df-refresh"]
    run([*argv, "--no_progress"])  # the version the refresh starts from
    conversion = prepare(*parse_args([*argv, "--incremental", *_dataflow_flags("gs://tfrp-test")]))
    components = launch(conversion, start(conversion.options.output)).job.proto_pipeline.components
    shuffles = [t for t in components.transforms.values() if t.spec.urn == GBK]
    producers = {_producer(components, next(iter(t.inputs.values()))) for t in shuffles}
    assert producers - ROW_LEVEL_PRODUCERS - {PIECE_RESULTS_PRODUCER} == REFRESH_PRODUCERS
    for step, shuffled in (
        ("WriteShards/WriteShard/ParDo", ERROR_ROW_PRODUCERS | {PIECE_RESULTS_PRODUCER}),
        ("RefreshRows/CarryShards", set()),
    ):
        start_name = next(
            t.unique_name for t in components.transforms.values() if t.unique_name.startswith(step)
        )
        assert _shuffled_after(components, start_name) == shuffled


def test_the_dataflow_shard_writer_sizes_its_threads_per_sdk_process(job_graph):
    """Dataflow starts one SDK harness process per vCPU, each with shard writers of its own:
    the writer's DoFn is told so, and takes one core's threads, not the machine's."""
    from apache_beam.internal import pickler
    from apache_beam.portability.api import beam_runner_api_pb2

    components = job_graph()
    (writer,) = [
        transform
        for transform in components.transforms.values()
        if transform.unique_name.endswith("ParDo(_WriteShardFn)")
    ]
    payload = beam_runner_api_pb2.ParDoPayload.FromString(writer.spec.payload)
    assert pickler.loads(payload.do_fn.payload)[0]._config.sdk_processes == 0


def test_a_folder_of_archives_is_read_an_archive_a_worker_and_shuffles_no_image_bytes(
    tmp_path, gcs
):
    """Each archive is one element of the whole-file read (the unit of parallel work); the
    shuffles are the same row-level ones as a CSV's."""
    import tarfile

    make_images(tmp_path, per_class=2)
    shards = tmp_path / "shards"
    shards.mkdir()
    for number, label in enumerate(("chelsea", "coffee")):
        with tarfile.open(shards / f"{number:06d}.tar", "w") as archive:
            archive.add(tmp_path / "images" / label, arcname=label)
    source = gcs(shards, "dataflow-archives")
    argv = ["--manifest", f"{source}/", "--output", "gs://tfrp-test/df-archives"]
    flags = _dataflow_flags("gs://tfrp-test", "--archive_order", "keep")
    conversion = prepare(*parse_args([*argv, *flags]))
    manifests, read = conversion.manifests()
    assert [manifest.kind for manifest in manifests] == ["archive"] * 2 and read.keep_order == 2
    components = launch(conversion, start(conversion.options.output)).job.proto_pipeline.components
    names = {t.unique_name for t in components.transforms.values()}
    assert any(name.startswith("ReadManifests/ReadWholeFiles/") for name in names)
    shuffles = [t for t in components.transforms.values() if t.spec.urn == GBK]
    producers = {_producer(components, next(iter(t.inputs.values()))) for t in shuffles}
    # Beam's Create spreads the archives' descriptions (a path and a size each) over workers.
    spread = "ReadManifests/ListWholeFiles/MaybeReshuffle/Reshuffle/ReshufflePerKey/"
    producers = {name for name in producers if not name.startswith(spread)}
    assert producers <= ROW_LEVEL_PRODUCERS | {PIECE_RESULTS_PRODUCER}
