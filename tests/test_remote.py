"""transforms/storage/remote.py: objects on Cloud Storage (against the GCS emulator) and on any
other store through Beam's FileSystems, which is never retried a second time around it."""

import pytest

from tfrecord_pipeline.transforms.storage import disk, remote, retry


@pytest.fixture(scope="module")
def objects(gcs, tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("remote")
    (folder / "a.jpg").write_bytes(b"\xff\xd8" + bytes(range(256)) * 4)
    (folder / "sub").mkdir()
    (folder / "sub" / "b.jpg").write_bytes(b"b")
    return gcs(folder, "remote")


def test_a_read_gives_the_bytes_and_the_identity_a_stat_gives(objects):
    data, identity = remote.read(f"{objects}/a.jpg", None)
    assert len(data) == remote.size(f"{objects}/a.jpg") == 1026
    assert identity == remote.identity(f"{objects}/a.jpg")
    assert remote.read(f"{objects}/a.jpg", 1026)[0] == data  # exactly the limit: not over


def test_an_object_over_the_limit_is_refused_with_its_size(objects):
    with pytest.raises(disk.FileTooLargeError, match="1,026 bytes, over the limit of 1,000"):
        remote.read(f"{objects}/a.jpg", 1000)


def test_a_stream_reads_ranges_of_an_object(objects):
    with remote.open_stream(f"{objects}/a.jpg", 16) as stream:
        assert stream.seek(2) == 2 and stream.read(3) == bytes([0, 1, 2])
        assert stream.seek(-2, 2) == 1024 and stream.read() == bytes([254, 255])


def test_a_match_lists_objects_at_any_depth_sorted(objects):
    assert remote.glob(f"{objects}/**") == [f"{objects}/a.jpg", f"{objects}/sub/b.jpg"]


def test_another_stores_read_is_left_to_its_own_client(monkeypatch):
    """Another store's FileSystems client retries its requests itself: a failure that reaches
    us is raised at once, not sent again by the retry layer as well."""
    opened = []

    class Store:
        @staticmethod
        def match(paths):
            return [type("Match", (), {"metadata_list": [_Metadata()]})]

        @staticmethod
        def open(path, compression_type):
            opened.append(path)
            raise ConnectionResetError("reset")

    monkeypatch.setattr(remote, "filesystems", lambda path: Store)
    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0)
    with pytest.raises(ConnectionResetError):
        remote.read("s3://bucket/a.jpg", None)
    assert opened == ["s3://bucket/a.jpg"]


class _Metadata:
    size_in_bytes = 3
    last_updated_in_seconds = 1.5
