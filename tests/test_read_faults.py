"""Reading images under faults: which failures are retried and which become an error row, and
gs:// conversions through a loopback proxy that injects them (tests/fault_proxy.py) in front of
the GCS emulator, giving the bytes of a run that met none."""

import errno
import http.client
import socket
from pathlib import Path

import pytest
import requests
import urllib3
from conftest import arguments, error_rows, make_images, write_manifest
from fault_proxy import DAMAGE, FAULTS, MAX_IN_A_ROW, planned_fault
from google.auth import exceptions as auth

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.versions import POINTER, resolve
from tfrecord_pipeline.read.verify import verify
from tfrecord_pipeline.runners.convert import run
from tfrecord_pipeline.transforms.errors import FaultError
from tfrecord_pipeline.transforms.storage import answers, disk, fileio, retry

TRANSIENT = [
    *(answers.TransientStoreError(f"{status} injected") for status in (408, 429, 500, 502, 503)),
    requests.ConnectionError("connection reset by peer"),
    requests.exceptions.ChunkedEncodingError("connection broken"),
    requests.ReadTimeout("read timed out"),
    urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead"),
    http.client.IncompleteRead(b"partial"),
    http.client.RemoteDisconnected("closed without response"),
    ConnectionResetError(),
    TimeoutError(),
    retry.CorruptTransferError("not matching X-Goog-Hash"),
    auth.TransportError(requests.ConnectionError("token endpoint unreachable")),
    auth.RefreshError("internal_failure", retryable=True),
    socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"),
    OSError(errno.ENETUNREACH, "Network is unreachable"),
    OSError(errno.EHOSTUNREACH, "No route to host"),
]
PERMANENT = [
    OSError("gs://b/x: 400 Bad Request"),
    answers.PreconditionFailedError("gs://b/x: 412 Precondition Failed"),
    FileNotFoundError(),
    PermissionError(),
    disk.FileTooLargeError(),
    ValueError(),
    auth.TransportError("no credentials"),
    auth.RefreshError("invalid_grant: token revoked"),
]


def _name(error: BaseException) -> str:
    return f"{type(error).__name__}{str(error)[:3]}"


@pytest.mark.parametrize("error", TRANSIENT, ids=_name)
def test_failures_of_the_service_or_the_network_are_transient(error):
    assert retry.is_transient(error)


@pytest.mark.parametrize("error", PERMANENT, ids=_name)
def test_failures_of_the_object_or_the_caller_are_not(error):
    assert not retry.is_transient(error)


def _failing(*errors: BaseException):
    """A request that raises `errors` in turn, then succeeds; and the list of its calls."""
    calls = []

    def request() -> str:
        calls.append(len(calls))
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "the body"

    return request, calls


def test_a_transient_failure_is_retried_until_the_request_passes(monkeypatch):
    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0)
    request, calls = _failing(answers.TransientStoreError("503"), requests.ConnectionError("reset"))
    assert retry.retried(request, "gs://b/x") == "the body" and len(calls) == 3


def test_the_objects_own_failure_is_raised_at_once(monkeypatch):
    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0)
    request, calls = _failing(FileNotFoundError(2, "no such object", "gs://b/x"))
    with pytest.raises(FileNotFoundError):
        retry.retried(request, "gs://b/x")
    assert len(calls) == 1


def test_a_request_failing_through_every_retry_is_a_fault_no_caller_mistakes_for_an_error(
    monkeypatch,
):
    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0)
    request, calls = _failing(*[answers.TransientStoreError("503 backend")] * retry.ATTEMPTS)
    with pytest.raises(retry.StoreUnavailableError) as raised:
        retry.retried(request, "gs://b/x")
    assert len(calls) == retry.ATTEMPTS
    # A FaultError (exit status 3), which no `except fileio.READ_ERRORS` turns into a row.
    assert isinstance(raised.value, FaultError)
    assert not isinstance(raised.value, fileio.READ_ERRORS)
    assert isinstance(raised.value.__cause__, answers.TransientStoreError)
    assert str(raised.value).startswith(
        "Cloud Storage kept failing a request for gs://b/x (503 backend) through 7 attempts"
    )


def test_the_backoff_doubles_with_jitter_over_half_a_minute():
    for attempt in range(retry.ATTEMPTS - 1):
        nominal = retry.FIRST_DELAY_S * 2**attempt
        assert all(nominal / 2 <= retry.backoff_s(attempt) <= nominal for _ in range(50))
    assert sum(retry.FIRST_DELAY_S * 2**attempt for attempt in range(retry.ATTEMPTS - 1)) == 31.5


def test_the_proxys_faults_are_seeded_and_never_more_than_two_in_a_row():
    def plans(seed):
        return [[planned_fault(seed, 0.5, f"GET /o/{i}", n) for n in range(4)] for i in range(300)]

    assert plans(7) == plans(7) != plans(8)
    assert all(plan[MAX_IN_A_ROW:] == [None, None] for plan in plans(7))
    first = [plan[0] for plan in plans(7)]
    assert set(first) == {None, *FAULTS} and 120 < sum(map(bool, first)) < 180


def _files(version: Path) -> dict[str, bytes]:
    return {
        path.relative_to(version).as_posix(): path.read_bytes()
        for path in version.rglob("*")
        if path.is_file()
    }


def _source(tmp_path: Path, upload) -> tuple[str, str]:
    """20 images and their manifest in the bucket under a prefix of this test's own: (the
    prefix, its gs:// folder)."""
    write_manifest(tmp_path / "src" / "manifest.csv", make_images(tmp_path / "src", per_class=5))
    prefix = f"faults-{tmp_path.name}"
    return prefix, upload(tmp_path / "src", prefix)


@pytest.mark.slow
def test_transient_faults_leave_every_byte_as_a_run_without_them_wrote(
    tmp_path, gcs, faulty_gcs, convert, request
):
    prefix, source = _source(tmp_path, gcs)
    flags = ("--num_shards", "3", "--split", "train=0.8,validation=0.2")
    clean, _ = convert(f"{source}/manifest.csv", *flags, output=tmp_path / "clean")
    proxy = faulty_gcs(f"{prefix}/", rate=0.35, seed=11)
    faulty, info = convert(f"{source}/manifest.csv", *flags, output=tmp_path / "faulty")

    assert set(proxy.faults) == set(FAULTS)  # 503s, dropped connections and cut bodies all met
    assert info.records == 20 and _files(faulty) == _files(clean)
    # One request per image, its media's, sent again only after a fault. (Beam's plan also
    # looks at up to 64 rows of each split for its size estimate, to write large shards in
    # pieces: here, every row.)
    images = {name for _, name in proxy.requests if name and name.startswith(f"{prefix}/images/")}
    assert len(images) == 20
    requests = 2 if request.node.callspec.params["convert"] == "beam" else 1
    assert {name: proxy.requests["GET", name] - proxy.failed[name] for name in images} == {
        name: requests for name in images
    }
    assert sum(proxy.failed[name] for name in images) >= 5


@pytest.mark.slow
def test_an_object_that_always_fails_is_an_error_row_and_the_rest_converts(
    tmp_path, gcs, faulty_gcs, convert
):
    prefix, source = _source(tmp_path, gcs)
    broken = {
        f"{prefix}/images/coffee/1.jpg": "503",
        f"{prefix}/images/rocket/3.jpg": "drop",
        f"{prefix}/images/astronaut/2.jpg": DAMAGE,  # never stored: it fails its X-Goog-Hash
    }
    proxy = faulty_gcs(f"{prefix}/", rate=0.2, seed=5, always=broken)
    # Sized by --target_shard_mb, so the plan's stat of a sample of rows meets them too.
    output, info = convert(f"{source}/manifest.csv", "--max_error_rate", "0.2")

    keys = ("images/astronaut/2.jpg", "images/coffee/1.jpg", "images/rocket/3.jpg")
    assert info.records == 17 and info.errors_by_reason == {"unavailable_file": 3}
    errors = error_rows(output)
    assert {error["key"]: error["reason"] for error in errors} == dict.fromkeys(
        keys, "unavailable_file"
    )
    assert {error["message"] for error in errors} == {
        f"{source}/{key}: every read failed, 7 attempts, while the store answered for it"
        for key in keys
    }
    assert proxy.failed[f"{prefix}/images/rocket/3.jpg"] >= retry.ATTEMPTS
    assert proxy.failed[f"{prefix}/images/astronaut/2.jpg"] >= retry.ATTEMPTS
    assert verify(str(tmp_path / "out"), "all") == (17, [])


@pytest.mark.slow
def test_a_refresh_converts_an_object_whose_stat_always_fails_into_its_error_row(
    tmp_path, gcs, faulty_gcs
):
    prefix, source = _source(tmp_path, gcs)
    argv = arguments(
        "--manifest {source}/manifest.csv --output {out} --no_progress --num_shards 2"
        " --max_error_rate 0.1",
        source=source,
        out=tmp_path / "root",
    )
    run(argv)
    faulty_gcs(f"{prefix}/", always={f"{prefix}/images/chelsea/0.jpg": "truncate"})
    refreshed = run([*argv, "--incremental"])
    assert refreshed.info.records == 19
    assert refreshed.info.errors_by_reason == {"unavailable_file": 1}


@pytest.mark.slow
def test_a_store_that_answers_nothing_about_an_object_fails_the_run_publishing_nothing(
    tmp_path, gcs, faulty_gcs, monkeypatch, capsys
):
    prefix, source = _source(tmp_path, gcs)
    broken = f"{prefix}/images/astronaut/2.jpg"
    faulty_gcs(f"{prefix}/", always={broken: "503"}, listings_too=True)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where the log file goes
    argv = arguments(
        "convert --manifest {source}/manifest.csv --output {out} --no_progress --num_shards 2",
        source=source,
        out=tmp_path / "out",
    )
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"tfrecord-pipeline: failed: Cloud Storage kept failing a request for "
        f"gs://tfrp-test/{broken} (503 "
    )
    assert not (tmp_path / "out" / POINTER).exists()


@pytest.mark.slow
def test_a_gs_folder_tree_listed_through_faults_gives_the_bytes_of_a_clean_listing(
    tmp_path, gcs, faulty_gcs, convert
):
    """Every listing page is one request of the one retry layer: a page that meets a 503, a
    dropped connection or a cut body is asked again, and the tree's rows come out the same."""
    make_images(tmp_path / "tree", per_class=5)
    prefix = f"tree-{tmp_path.name}"
    tree = gcs(tmp_path / "tree" / "images", prefix) + "/"
    clean, _ = convert(tree, "--num_shards", "2", output=tmp_path / "clean")
    proxy = faulty_gcs(f"{prefix}/", rate=0.35, seed=7, listings_too=True)
    faulty, info = convert(tree, "--num_shards", "2", output=tmp_path / "faulty")

    assert info.records == 20 and _files(faulty) == _files(clean)
    failed_listings = {listed for listed in proxy.failed if listed.endswith("/")}
    assert failed_listings  # folders whose listing failed, then passed


def _objects(root: str) -> dict[str, bytes]:
    """Every object of a published version by its name inside it."""
    folder = resolve(root).folder
    names = fileio.glob(f"{folder}/**")
    return {name[len(folder) + 1 :]: fileio.read_bytes(name) for name in names}


@pytest.mark.slow
def test_publishing_into_a_bucket_through_faults_gives_the_version_a_clean_run_gives(
    tmp_path, gcs, faulty_gcs, convert
):
    """The pointer's read, the root's listings and every metadata read meet 503s, drops and cut
    bodies, on a conversion and then a refresh into the bucket: both publish, and what they
    publish is what runs without faults publish."""
    prefix, source = _source(tmp_path, gcs)
    flags = ("--num_shards", "2", "--keep_versions", "1")
    clean_root, faulty_root = (f"gs://tfrp-test/{prefix}/{name}" for name in ("clean", "faulty"))
    for root in (clean_root, faulty_root):
        if root == faulty_root:
            proxy = faulty_gcs(f"{prefix}/", rate=0.35, seed=7, listings_too=True)
        convert(f"{source}/manifest.csv", *flags, output=root)
        _, info = convert(f"{source}/manifest.csv", *flags, "--incremental", output=root)
        assert info.records == 20 and verify(root, "all") == (20, [])

    assert _objects(faulty_root) == _objects(clean_root)
    assert proxy.failed[f"{prefix}/faulty/{POINTER}"] and set(proxy.faults) == set(FAULTS)


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS)
def test_a_pointer_write_whose_answer_is_lost_publishes_the_version_once(
    tmp_path, gcs, faulty_gcs, fault
):
    """The conditional write of LATEST is sent again after a failure. When the first took
    effect and only its answer was lost ("truncate"), the second is refused (the generation
    moved on) and the run reads the pointer: its own version, so it is published, not
    superseded."""
    prefix, source = _source(tmp_path, gcs)
    root = f"gs://tfrp-test/{prefix}/out"
    proxy = faulty_gcs(f"{prefix}/", first_upload={f"{prefix}/out/{POINTER}": fault})
    argv = arguments(
        "--manifest {source}/manifest.csv --output {root} --no_progress --num_shards 2",
        source=source,
        root=root,
    )
    converted = run(argv)

    assert not converted.info.failures and resolve(root).folder == converted.folder
    assert proxy.faults == {fault: 1} and verify(root, "none") == (20, [])
