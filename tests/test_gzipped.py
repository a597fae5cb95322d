"""A gzip-compressed tar listed as one stream, its images unpacked into a staged file
(transforms/archive/gzipped.py, transforms/archive/unpack.py)."""

import io
import tarfile
from pathlib import Path

from conftest import encode, photo

from tfrecord_pipeline.transforms.archive.kinds import read_entries
from tfrecord_pipeline.transforms.archive.members import Entry, Refused, read_member
from tfrecord_pipeline.transforms.archive.unpack import Unpacked
from tfrecord_pipeline.transforms.errors import Reason, RowError


def _tgz(path, members: dict[str, bytes]) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def _list(path, folder, max_bytes=1 << 20):
    with Unpacked(str(folder), path, max_bytes) as unpacked:
        return list(read_entries(path, unpacked))


def test_members_are_unpacked_into_one_staged_file_and_read_back_by_their_range(tmp_path):
    cat, dog = encode(photo(), "PNG"), encode(photo("rocket.jpg"))
    path = _tgz(tmp_path / "pets.tgz", {"cat/a.png": cat, "dog/b.jpg": dog})
    entries = _list(path, tmp_path / "staging")
    assert [e.name for e in entries] == ["cat/a.png", "dog/b.jpg"]
    assert len({e.member.container for e in entries}) == 1
    assert [read_member(e.member, e.name, 1 << 20) for e in entries] == [cat, dog]
    assert entries[0].member.identity == f"{len(cat)}:1700000000"  # the member's, not the copy's


def test_a_member_over_the_limit_is_never_copied_and_reads_as_too_large(tmp_path):
    path = _tgz(tmp_path / "a.tar.gz", {"big.jpg": b"x" * 5000, "small.jpg": b"y" * 10})
    big, small = _list(path, tmp_path / "staging", max_bytes=1000)
    staged = (tmp_path / "staging").iterdir()
    assert [p.stat().st_size for p in staged] == [10]
    try:
        read_member(big.member, "a.tar.gz#big.jpg", 1000)
        raise AssertionError("read")
    except RowError as error:
        assert error.reason == Reason.FILE_TOO_LARGE
    assert read_member(small.member, "small", 1000) == b"y" * 10


def test_a_corrupt_or_cut_gzip_refuses_the_rest_after_the_members_read(tmp_path):
    data = bytes(range(256)) * 400
    good = Path(_tgz(tmp_path / "g.tgz", {"a.jpg": b"a" * 100, "b.jpg": data})).read_bytes()
    bad = tmp_path / "bad.tgz"
    bad.write_bytes(good[:10] + b"\xff" * 50 + good[60:])  # the deflate stream's first blocks
    (refused,) = _list(str(bad), tmp_path / "staging")
    assert isinstance(refused, Refused) and refused.reason == Reason.CORRUPT_ARCHIVE
    truncated = tmp_path / "cut.tgz"
    truncated.write_bytes(good[: len(good) - 200])
    first, *_, last = _list(str(truncated), tmp_path / "staging")
    assert isinstance(first, Entry) and first.name == "a.jpg"
    assert isinstance(last, Refused) and last.reason == Reason.CORRUPT_ARCHIVE


def test_unsafe_links_and_nested_tars_are_refused_as_in_a_plain_tar(tmp_path):
    path = tmp_path / "x.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for name, kind in (("../up.jpg", tarfile.REGTYPE), ("l.jpg", tarfile.SYMTYPE)):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, "a.jpg"
            tar.addfile(info, io.BytesIO(b""))
        info = tarfile.TarInfo("inner.tar")
        tar.addfile(info, io.BytesIO(b""))
    reasons = [e.reason for e in _list(str(path), tmp_path / "s")]
    assert reasons == [Reason.UNSAFE_MEMBER, Reason.NOT_A_FILE, Reason.UNSUPPORTED_MEMBER]
