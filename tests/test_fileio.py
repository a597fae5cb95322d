"""transforms/storage/fileio.py on local paths, at the unit tier: path arithmetic, the other entry
points to a read (identified, streamed) on paths that are no regular file, reads in chunks
past a file's stated size, durable writes that leave nothing half written, and the folder
helpers, and reads that stop at the size limit. (read_bytes on FIFOs, sockets, devices and
folders: tests/test_hostile_files.py.)"""

import contextlib
import os
from pathlib import Path

import google_crc32c
import pytest

from tfrecord_pipeline.transforms.storage import disk, fileio, gcs, joins

CMDLINE = "/proc/self/cmdline"  # stat says 0 bytes, reading gives more; fixed for the process


@pytest.mark.parametrize(
    ("base", "parts", "joined"),
    [
        ("gs://bucket/root", ("versions", "v1"), "gs://bucket/root/versions/v1"),
        ("gs://bucket/root/", ("LATEST",), "gs://bucket/root/LATEST"),
        ("/data/root", ("versions", "v1"), "/data/root/versions/v1"),
        ("s3://bucket", ("a",), "s3://bucket/a"),
        ("rel", ("a",), "rel/a"),
    ],
)
def test_join(base, parts, joined):
    assert fileio.join(base, *parts) == joined


@pytest.mark.parametrize(
    ("path", "remote", "on_gcs", "absolute"),
    [
        ("gs://bucket/a.jpg", True, True, True),
        ("s3://bucket/a.jpg", True, False, True),
        ("/data/a.jpg", False, False, True),
        ("data/a.jpg", False, False, False),
        ("gs:/bucket/a.jpg", False, False, False),  # one slash: a local relative path
    ],
)
def test_what_a_path_names(path, remote, on_gcs, absolute):
    assert (fileio.is_remote(path), gcs.is_gcs(path), fileio.is_absolute(path)) == (
        remote,
        on_gcs,
        absolute,
    )
    assert fileio.absolute(path) == (path if absolute else os.path.join(os.getcwd(), path))


def test_dirname_of_a_local_path_is_absolute_and_of_an_object_its_prefix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert fileio.dirname("a/b.jpg") == str(tmp_path / "a")
    assert fileio.dirname("b.jpg") == str(tmp_path)
    assert fileio.dirname("gs://bucket/a/b.jpg") == "gs://bucket/a"


READERS = {
    "read_identified": lambda path: fileio.read_identified(path, 1 << 20),
    "open_bytes": lambda path: fileio.open_bytes(path, 1 << 16).close(),
    "read_text": fileio.read_text,
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize(("make", "kind"), [(os.mkfifo, "a FIFO"), (os.mkdir, "a folder")])
def test_every_entry_point_refuses_what_is_not_a_regular_file_even_through_a_link(
    tmp_path, reader, make, kind
):
    """A FIFO without a writer would block an open or a read forever: the test would hang."""
    make(tmp_path / "target")
    (tmp_path / "link.jpg").symlink_to(tmp_path / "target")
    for path in (tmp_path / "target", tmp_path / "link.jpg"):
        with pytest.raises(disk.NotAFileError, match=f"is {kind}, not a regular file"):
            READERS[reader](str(path))


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_dangling_link_is_a_missing_file(tmp_path, reader):
    (tmp_path / "link.jpg").symlink_to(tmp_path / "gone.jpg")
    with pytest.raises(fileio.MISSING):
        READERS[reader](str(tmp_path / "link.jpg"))


def test_read_identified_gives_the_identity_the_file_had(tmp_path):
    path = tmp_path / "a.jpg"
    path.write_bytes(b"\xff\xd8\xff\xe0")
    data, identity = fileio.read_identified(str(path))
    status = path.stat()
    assert (data, identity) == (b"\xff\xd8\xff\xe0", f"4:{status.st_mtime_ns}")
    assert fileio.identity(str(path)) == identity
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns + 1))  # rewritten, same size
    assert fileio.identity(str(path)) != identity


def test_read_text_drops_a_byte_order_mark(tmp_path):
    path = tmp_path / "m.csv"
    path.write_bytes("\ufeffimage_uri,label\né.jpg,cat\n".encode())
    assert fileio.read_text(str(path)) == "image_uri,label\né.jpg,cat\n"


def test_open_bytes_streams_a_regular_file_unbuffered(tmp_path):
    (tmp_path / "m.csv").write_bytes(b"0123456789")
    with fileio.open_bytes(str(tmp_path / "m.csv"), 4) as stream:
        assert (stream.read(3), stream.seek(7), stream.read()) == (b"012", 7, b"789")


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_a_file_longer_than_it_says_is_read_whole_in_chunks_up_to_the_limit(monkeypatch, chunk):
    """procfs files say they are empty, so the first read comes back short: the rest is read in
    chunks until the end or the limit, whatever the chunk size."""
    monkeypatch.setattr(disk, "_CHUNK", chunk)
    with open(CMDLINE, "rb") as handle:
        whole = handle.read()
    assert os.stat(CMDLINE).st_size == 0 and whole
    assert fileio.read_bytes(CMDLINE) == whole
    assert fileio.read_bytes(CMDLINE, len(whole)) == whole  # exactly the limit: not over
    limit = len(whole) - 1
    with pytest.raises(
        disk.FileTooLargeError, match=f"larger than that, over the limit of {limit}"
    ):
        fileio.read_bytes(CMDLINE, limit)


def test_an_empty_file_reads_as_no_bytes(tmp_path):
    (tmp_path / "empty.jpg").write_bytes(b"")
    assert fileio.read_identified(str(tmp_path / "empty.jpg"), 0)[0] == b""


def test_write_durably_replaces_a_file_whole_and_makes_its_folders(tmp_path):
    path = tmp_path / "new" / "LATEST"
    fileio.write_durably(str(path), b"first")
    fileio.write_durably(str(path), b"second")
    assert path.read_bytes() == b"second"
    assert os.listdir(path.parent) == ["LATEST"]  # no temporary file left beside it


@pytest.mark.parametrize(
    ("name", "data", "error"),
    [
        ("LATEST", "text, not bytes", TypeError),  # the write itself fails
        ("busy", b"new", IsADirectoryError),  # the rename over the path fails
    ],
)
def test_a_failed_durable_write_leaves_what_was_there_and_no_partial_file(
    tmp_path, name, data, error
):
    (tmp_path / "LATEST").write_bytes(b"old")
    (tmp_path / "busy").mkdir()
    with pytest.raises(error):
        fileio.write_durably(str(tmp_path / name), data)
    assert (tmp_path / "LATEST").read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["LATEST", "busy"]


def test_names_in_lists_files_and_folders_sorted_and_nothing_for_a_missing_folder(tmp_path):
    for name in ("b.txt", ".hidden", "A.jpg"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.txt").write_bytes(b"")
    assert fileio.names_in(str(tmp_path)) == [".hidden", "A.jpg", "b.txt", "sub"]
    assert fileio.names_in(str(tmp_path / "missing")) == []
    assert fileio.names_in(str(tmp_path / "b.txt")) == []  # a file holds no names


def test_delete_tree_deletes_everything_under_it_and_nothing_a_link_in_it_points_to(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.jpg").write_bytes(b"keep")
    tree = tmp_path / "staging"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "shard").write_bytes(b"x")
    (tree / "link").symlink_to(outside)
    fileio.delete_tree(str(tree))
    assert not os.path.lexists(tree) and (outside / "keep.jpg").read_bytes() == b"keep"
    fileio.delete_tree(str(tree))  # gone already: not an error


def test_delete_tree_never_deletes_through_a_link_given_as_the_folder(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "keep.jpg").write_bytes(b"keep")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with contextlib.suppress(OSError):  # whether the link goes or stays is not the point
        fileio.delete_tree(str(tmp_path / "link"))
    assert (tmp_path / "real" / "keep.jpg").read_bytes() == b"keep"


def test_delete_and_glob(tmp_path):
    for name in ("a.jpg", "s/b.jpg", "s/t/c.jpg", "s/t/d.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    assert fileio.glob(str(tmp_path / "**" / "*.jpg")) == [
        str(tmp_path / name) for name in ("a.jpg", "s/b.jpg", "s/t/c.jpg")
    ]
    assert fileio.glob(str(tmp_path / "s" / "*")) == [str(tmp_path / "s" / "b.jpg")]  # no folders
    fileio.delete([str(tmp_path / "a.jpg"), str(tmp_path / "never.jpg")])  # missing: no error
    assert not (tmp_path / "a.jpg").exists()


@pytest.mark.parametrize("chunk", [3, joins.JOIN_CHUNK_BYTES])
def test_join_files_concatenates_and_gives_the_crc32c_of_the_whole(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(joins, "JOIN_CHUNK_BYTES", chunk)
    parts = [b"first piece ", b"", b"second piece"]
    sources = []
    for index, data in enumerate(parts):
        sources.append(str(tmp_path / f"piece-{index}"))
        Path(sources[-1]).write_bytes(data)
    destination = tmp_path / "out" / "shard.tfrecord"
    crc = joins.join_files(sources, str(destination))
    assert destination.read_bytes() == b"".join(parts)
    assert crc == google_crc32c.value(b"".join(parts))
    assert joins.join_files([], str(tmp_path / "empty")) == 0
    assert (tmp_path / "empty").read_bytes() == b""


def test_a_copy_is_the_same_bytes_in_a_file_of_its_own(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"bytes")
    fileio.copy(str(tmp_path / "a.jpg"), str(tmp_path / "new" / "b.jpg"))
    assert (tmp_path / "new" / "b.jpg").read_bytes() == b"bytes"
    assert (tmp_path / "new" / "b.jpg").stat().st_ino != (tmp_path / "a.jpg").stat().st_ino


def test_a_folder_is_writable_if_it_or_its_nearest_existing_parent_is_a_folder(tmp_path):
    fileio.check_writable_folder(str(tmp_path / "not" / "yet" / "made"))
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="a file, not a folder"):
        fileio.check_writable_folder(str(tmp_path / "file" / "below"))
    fileio.check_writable_folder("gs://bucket/anything")  # checked by the first write


def test_walk_lists_files_sorted_and_says_which_folders_it_did_not_list(tmp_path):
    for name in ("b/x.jpg", "a/deep/y.jpg", "z.jpg"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "c").symlink_to(tmp_path / "b")  # the same folder again
    (tmp_path / "dangling.jpg").symlink_to(tmp_path / "gone")  # not a folder: a file to read
    assert list(disk.walk(str(tmp_path), 1)) == [
        disk.Unlisted("a/deep"),  # deeper than asked
        "b/x.jpg",
        disk.Unlisted("c", same_as="b"),
        "dangling.jpg",
        "z.jpg",
    ]
    missing = list(disk.walk(str(tmp_path / "missing"), 1))
    assert missing == [disk.Unlisted(".", error="No such file or directory")]


def test_reads_stop_at_the_limit(tmp_path):
    exact = tmp_path / "exact.bin"
    exact.write_bytes(b"x" * 1000)
    assert len(fileio.read_bytes(str(exact), 1000)) == 1000
    with pytest.raises(disk.FileTooLargeError, match="1,000 bytes, over the limit of 999"):
        fileio.read_bytes(str(exact), 999)
    sparse = tmp_path / "sparse.bin"
    with open(sparse, "wb") as handle:
        handle.truncate(1 << 40)  # 1 TiB that takes no disk: read whole, it would take memory
    with pytest.raises(disk.FileTooLargeError, match="1,099,511,627,776 bytes"):
        fileio.read_bytes(str(sparse), 256 << 20)
    # procfs files say they are empty: read on, never past the limit
    status = "/proc/self/status"
    assert os.stat(status).st_size == 0
    assert fileio.read_bytes(status, 1 << 20).startswith(b"Name:")
    with pytest.raises(disk.FileTooLargeError, match="larger than that, over the limit of 64"):
        fileio.read_bytes(status, 64)
