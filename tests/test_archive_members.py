"""transforms/archive/members.py reading hostile members: zip bombs whose header lies about
their size, members declaring more than --max_file_mb (never read), CRCs that do not match,
members cut short, and entries pointing where no local header is."""

import zipfile

import pytest
from archive_data import lying_size, patch_headers, zip_bytes

from tfrecord_pipeline.transforms.archive.members import Member, read_member, split_member_uri
from tfrecord_pipeline.transforms.archive.zips import zip_entries
from tfrecord_pipeline.transforms.errors import Reason, RowError

LIMIT = 1 << 20  # --max_file_mb 1
ZEROS = b"\0" * (8 << 20)  # 8 MiB that deflate to 8 KiB


def _member(tmp_path, data: bytes) -> Member:
    """The only member of the zip `data`, as listed."""
    path = tmp_path / "x.zip"
    path.write_bytes(data)
    with open(path, "rb", buffering=0) as stream:
        (entry,) = zip_entries(stream, len(data), str(path))
    return entry.member


def _refused(member: Member) -> Reason:
    with pytest.raises(RowError) as refused:
        read_member(member, "x.zip#m", LIMIT)
    return refused.value.reason


def test_a_bomb_inflating_past_its_declared_size_is_corrupt(tmp_path):
    """8 MiB of zeros declared as 100 bytes: refused once inflated one byte over."""
    member = _member(tmp_path, lying_size(zip_bytes([("b.jpg", ZEROS)], zipfile.ZIP_DEFLATED), 100))
    assert member.size == 100
    assert _refused(member) == Reason.CORRUPT_ARCHIVE


def test_a_member_declaring_over_the_limit_is_refused_unread(tmp_path):
    member = _member(tmp_path, zip_bytes([("b.jpg", ZEROS)], zipfile.ZIP_DEFLATED))
    (tmp_path / "x.zip").unlink()  # a read would now fail otherwise
    assert _refused(member) == Reason.FILE_TOO_LARGE


def test_a_member_whose_stored_bytes_are_over_the_limit_is_refused_unread(tmp_path):
    """A small declared size over a huge compressed one: the stored bytes were read whole
    (as much memory as the archive is large), then found not to inflate."""
    member = Member(str(tmp_path / "gone.zip"), 0, 1 << 40, 10, method=8, crc=0, header=30)
    assert _refused(member) == Reason.FILE_TOO_LARGE


def test_a_crc_that_does_not_match_is_corrupt(tmp_path):
    data = patch_headers(zip_bytes([("a.jpg", b"image bytes")]), 14, 16, 0x1234, "<I")
    assert _refused(_member(tmp_path, data)) == Reason.CORRUPT_ARCHIVE


def test_a_member_cut_short_is_corrupt(tmp_path):
    member = _member(tmp_path, zip_bytes([("a.jpg", b"image bytes" * 100)]))
    (tmp_path / "x.zip").write_bytes((tmp_path / "x.zip").read_bytes()[:300])
    assert _refused(member) == Reason.CORRUPT_ARCHIVE


def test_an_entry_pointing_where_no_local_header_is_is_corrupt(tmp_path):
    member = _member(tmp_path, zip_bytes([("a.jpg", b"image bytes" * 100)]))
    assert _refused(member._replace(offset=member.offset + 1)) == Reason.CORRUPT_ARCHIVE


def test_a_tar_member_cut_short_is_corrupt(tmp_path):
    (tmp_path / "x.tar").write_bytes(b"\1" * 600)
    assert _refused(Member(str(tmp_path / "x.tar"), 512, 200, 200)) == Reason.CORRUPT_ARCHIVE


@pytest.mark.parametrize(
    ("uri", "split"),
    [
        ("a.tar#cat/0.jpg", ("a.tar", "cat/0.jpg")),
        ("a.zip#x#y.jpg", ("a.zip", "x#y.jpg")),
        ("a.tar#in.tar#0.jpg", ("a.tar", "in.tar#0.jpg")),
        ("photo#1.jpg", None),
    ],
)
def test_member_uris(uri, split):
    assert split_member_uri(uri) == split
