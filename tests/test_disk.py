"""transforms/storage/disk.py at the unit tier: what is not already checked through fileio's
entry points (tests/test_fileio.py) or against hostile paths (tests/test_hostile_files.py)."""

import errno
import os

import pytest

from tfrecord_pipeline.transforms.storage import disk, write_behind


def test_a_size_over_the_limit_says_how_much_when_it_is_known():
    disk.check_size("a.jpg", 10, 10)  # exactly the limit: not over
    disk.check_size("a.jpg", 1 << 40, None)  # no limit
    with pytest.raises(disk.FileTooLargeError, match="a.jpg: 11 bytes, over the limit of 10"):
        disk.check_size("a.jpg", 11, 10)
    with pytest.raises(disk.FileTooLargeError, match="a.jpg: larger than that, over the limit"):
        disk.check_size("a.jpg", 11, 10, known=False)


def test_a_read_gives_the_identity_a_stat_gives(tmp_path):
    path = tmp_path / "a.jpg"
    path.write_bytes(b"\xff\xd8\xff")
    assert disk.read(str(path), None) == (b"\xff\xd8\xff", disk.identity(os.stat(path)))


def test_create_makes_the_parent_folders(tmp_path):
    with disk.create(str(tmp_path / "a" / "b" / "c.bin")) as handle:
        handle.write(b"x")
    assert (tmp_path / "a" / "b" / "c.bin").read_bytes() == b"x"


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise to ask with")
def test_a_new_file_is_written_behind_as_it_grows(tmp_path, monkeypatch):
    # The kernel's own call, spied on and still made: the writeback it starts is Linux's.
    asked, advise = [], os.posix_fadvise
    monkeypatch.setattr(os, "posix_fadvise", lambda *call: asked.append(call[1:]) or advise(*call))
    data = os.urandom(4 * write_behind.WRITE_BEHIND_BYTES + 12_345)
    with disk.create(str(tmp_path / "shard")) as handle:
        for start in range(0, len(data), 70_000):  # records, as a shard writer writes them
            handle.write(data[start : start + 70_000])
        handle.flush()
        os.fsync(handle.fileno())
    assert (tmp_path / "shard").read_bytes() == data
    assert len(asked) >= 3 and all(advice == os.POSIX_FADV_DONTNEED for *_, advice in asked)
    ends = [offset + length for offset, length, _ in asked]
    assert [offset for offset, _, _ in asked] == [0, *ends[:-1]]  # each range once, in turn
    assert all(length >= write_behind.WRITE_BEHIND_BYTES for _, length, _ in asked)
    # What is left for the flush: less than a range and the buffer that reached the file last.
    assert len(data) - ends[-1] < write_behind.WRITE_BEHIND_BYTES + (1 << 20)


def test_a_copy_has_bytes_of_its_own(tmp_path):
    source, copy = tmp_path / "a.bin", tmp_path / "new" / "b.bin"
    source.write_bytes(os.urandom(3 << 20))
    disk.copy(str(source), str(copy))
    assert copy.read_bytes() == source.read_bytes()
    with open(source, "r+b") as handle:  # a write into the source, as root can make it
        handle.write(b"changed")
    assert copy.read_bytes() != source.read_bytes()


@pytest.mark.parametrize("code", [errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP])
def test_where_the_kernel_cannot_copy_the_bytes_are_copied_here(tmp_path, monkeypatch, code):
    (tmp_path / "a.jpg").write_bytes(b"bytes")

    def refused(*_):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "copy_file_range", refused)
    disk.copy(str(tmp_path / "a.jpg"), str(tmp_path / "new" / "b.jpg"))
    assert (tmp_path / "new" / "b.jpg").read_bytes() == b"bytes"


def test_a_copy_that_fails_otherwise_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        disk.copy(str(tmp_path / "missing.jpg"), str(tmp_path / "b.jpg"))
    assert not (tmp_path / "b.jpg").exists()


def test_a_durable_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "LATEST"
    disk.write_durably(str(path), b"old")

    def full(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        disk.write_durably(str(path), b"new")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["LATEST"]
