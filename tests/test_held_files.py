"""transforms/storage/held_files.py: an archive's file held open by the thread that reads its
members, read only while it is the file they were listed in."""

import os
import threading

from tfrecord_pipeline.transforms.storage import disk, held_files
from tfrecord_pipeline.transforms.storage.held_files import read_listed


def _identity(path) -> str:
    return disk.identity(os.stat(path))


def test_a_held_file_is_read_again_without_an_open(tmp_path):
    path = tmp_path / "a.tar"
    path.write_bytes(b"0123456789")
    listed = _identity(path)
    assert read_listed(str(path), 2, 5, listed) == b"234"
    path.unlink()  # no open could find it now: the held file is read
    assert read_listed(str(path), 5, 9, listed) == b"5678"


def test_a_file_rewritten_in_place_is_not_read(tmp_path):
    path = tmp_path / "a.tar"
    path.write_bytes(b"0123456789")
    listed = _identity(path)
    assert read_listed(str(path), 0, 2, listed) == b"01"
    path.write_bytes(b"another archive, longer")
    assert read_listed(str(path), 0, 2, listed) is None


def test_a_file_replaced_under_its_name_is_opened_again(tmp_path):
    """The next run lists the new file: a file held from the old one is not it."""
    path, new = tmp_path / "a.tar", tmp_path / "new.tar"
    path.write_bytes(b"0123456789")
    assert read_listed(str(path), 0, 2, _identity(path)) == b"01"
    new.write_bytes(b"abcdefghijklmnop")
    os.replace(new, path)
    assert read_listed(str(path), 0, 2, _identity(path)) == b"ab"


def test_a_thread_holds_no_more_than_its_share(tmp_path):
    def read_all() -> None:
        for number in range(held_files.HELD + 5):
            path = tmp_path / f"{number}.tar"
            path.write_bytes(b"x" * (number + 1))
            assert read_listed(str(path), 0, 1, _identity(path)) == b"x"
        found.append(len(held_files._threads.held))

    found: list[int] = []
    thread = threading.Thread(target=read_all)
    thread.start()
    thread.join()
    assert found == [held_files.HELD]
