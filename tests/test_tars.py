"""transforms/archive/tars.py on hostile tars made for real: names that leave the archive or are
not UTF-8, links and devices, sizes of 1 TiB and below zero, archives cut short, tars nested too
deep, headers tarfile cannot parse, and a million empty members listed in bounded memory."""

import io
import subprocess
import sys
import tarfile

import pytest
from archive_data import (
    empty_members_tar,
    looping_tar,
    nested_tar,
    tar_bytes,
    tar_header,
    tar_member,
)
from archive_data import with_checksum as checksummed

from tfrecord_pipeline.transforms.archive.members import Entry, Refused, read_member
from tfrecord_pipeline.transforms.archive.tars import MAX_HEADER_BYTES, MAX_NESTING, tar_entries
from tfrecord_pipeline.transforms.errors import Reason

IMAGE = b"\xff\xd8 a jpeg's bytes \xff\xd9"
GOOD = tar_member("cat/0.jpg", IMAGE)
RSS_BOUND_MB = 400  # listing holds one member at a time: far below this however many


def _listed(tmp_path, data: bytes, name: str = "x.tar") -> list:
    path = tmp_path / name
    path.write_bytes(data)
    with open(path, "rb", buffering=0) as stream:
        return list(tar_entries(stream, len(data), str(path)))


def _reasons(items) -> dict[str, Reason]:
    return {item.held_as: item.reason for item in items if isinstance(item, Refused)}


def _names(items) -> list[str]:
    return [item.name for item in items if isinstance(item, Entry)]


def test_names_that_leave_the_archive_are_unsafe(tmp_path):
    bad = ["../evil.jpg", "/etc/evil.jpg", "cat/../../evil.jpg", "./../evil.jpg"]
    items = _listed(tmp_path, tar_bytes([tar_member(n, IMAGE) for n in bad] + [GOOD]))
    assert _reasons(items) == dict.fromkeys(bad, Reason.UNSAFE_MEMBER)
    assert _names(items) == ["cat/0.jpg"]


def test_links_devices_and_fifos_are_not_files(tmp_path):
    special = [
        tar_member("cat/sym.jpg", kind=tarfile.SYMTYPE, linkname="/etc/passwd"),
        tar_member("cat/hard.jpg", kind=tarfile.LNKTYPE, linkname="cat/0.jpg"),
        tar_member("cat/chr.jpg", kind=tarfile.CHRTYPE, devmajor=1, devminor=5),
        tar_member("cat/blk.jpg", kind=tarfile.BLKTYPE, devmajor=8),
        tar_member("cat/fifo.jpg", kind=tarfile.FIFOTYPE),
    ]
    items = _listed(tmp_path, tar_bytes([GOOD, *special]))
    assert _reasons(items) == {info.name: Reason.NOT_A_FILE for info, _ in special}
    assert _names(items) == ["cat/0.jpg"]


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_a_member_declaring_a_tebibyte_in_a_small_file_ends_the_listing(tmp_path, fmt):
    huge = tarfile.TarInfo("cat/huge.jpg")
    huge.size = 1 << 40
    data = tar_bytes([GOOD], fmt)[:1024] + huge.tobuf(fmt, "utf-8", "strict") + IMAGE
    items = _listed(tmp_path, data)
    assert _names(items) == ["cat/0.jpg"]
    assert _reasons(items) == {"cat/huge.jpg": Reason.CORRUPT_ARCHIVE}


def test_a_negative_size_ends_the_listing_rather_than_looping_back(tmp_path):
    """A base-256 size below zero sends tarfile back to an earlier header (before Python
    3.12.12 and 3.13.6): the listing went round b, c, b, c... for ever."""
    members = [GOOD, tar_member("cat/1.jpg", IMAGE), tar_member("cat/2.jpg", IMAGE)]
    items = _listed(tmp_path, looping_tar(members))
    assert _names(items) == ["cat/0.jpg", "cat/1.jpg"]
    assert _reasons(items) == {"cat/2.jpg": Reason.CORRUPT_ARCHIVE}


def test_a_tar_cut_inside_a_member_refuses_that_member(tmp_path):
    data = tar_bytes([GOOD, tar_member("cat/1.jpg", IMAGE * 100)])
    items = _listed(tmp_path, data[: 1024 + 700])
    assert _names(items) == ["cat/0.jpg"]
    assert _reasons(items) == {"cat/1.jpg": Reason.CORRUPT_ARCHIVE}


def test_a_tar_cut_inside_a_header_refuses_the_rest(tmp_path):
    data = tar_bytes([GOOD, tar_member("cat/1.jpg", IMAGE)])
    items = _listed(tmp_path, data[: 1024 + 200])
    assert _names(items) == ["cat/0.jpg"]
    assert _reasons(items) == {"": Reason.CORRUPT_ARCHIVE}


def test_garbage_named_tar_is_refused_whole(tmp_path):
    items = _listed(tmp_path, bytes(range(256)) * 8)
    assert [(i.held_as, i.reason) for i in items] == [("", Reason.CORRUPT_ARCHIVE)]


def test_a_name_that_is_not_utf8_is_refused_and_shown_in_utf8(tmp_path):
    """The refusal's name becomes an error row written as UTF-8: a lone surrogate (how
    tarfile hands raw bytes back) cannot be written, so it is shown escaped."""
    items = _listed(tmp_path, tar_bytes([tar_member("cat/caf\udce9.jpg", IMAGE), GOOD]))
    assert _reasons(items) == {"cat/caf\\xe9.jpg": Reason.BAD_MEMBER_NAME}
    assert _names(items) == ["cat/0.jpg"]


def test_tars_nested_deeper_than_the_limit_are_refused(tmp_path):
    items = _listed(tmp_path, nested_tar(MAX_NESTING, IMAGE))
    assert _names(items) == ["level1/level2/cat/0.jpg"]
    items = _listed(tmp_path, nested_tar(MAX_NESTING + 1, IMAGE))
    assert _names(items) == []
    assert _reasons(items) == {"level1.tar#level2.tar#level3.tar": Reason.NESTED_TOO_DEEP}


def test_a_nested_members_bytes_are_read_from_the_outer_archive(tmp_path):
    items = _listed(tmp_path, nested_tar(MAX_NESTING, IMAGE))
    assert read_member(items[0].member, "x.tar#m", 1 << 20) == IMAGE


def test_an_old_gnu_sparse_header_cut_in_its_extension_is_corrupt(tmp_path):
    """tarfile reads a sparse header's extension blocks without checking they are there: an
    IndexError, which stopped the whole run."""
    sparse = bytearray(tar_header(tar_member("cat/s.jpg", kind=tarfile.GNUTYPE_SPARSE)[0]))
    sparse[482] = 1  # "an extension block follows"
    data = tar_bytes([GOOD])[:1024] + checksummed(sparse) + b"\0" * 100
    items = _listed(tmp_path, data)
    assert _names(items) == ["cat/0.jpg"]
    assert _reasons(items) == {"": Reason.CORRUPT_ARCHIVE}


def test_a_sparse_map_over_the_header_budget_is_corrupt(tmp_path):
    """tarfile keeps an old GNU sparse header's map, extension block after extension block,
    whatever its length: 100 MB of them took 325 MB of memory, a larger archive more."""
    sparse = bytearray(tar_header(tar_member("cat/s.jpg", kind=tarfile.GNUTYPE_SPARSE)[0]))
    sparse[482] = 1  # "an extension block follows"
    extension = bytearray(tarfile.BLOCKSIZE)
    for at in range(0, 21 * 24, 24):  # 21 (offset, length) pairs, then "another follows"
        extension[at : at + 24] = b"%011o\0%011o\0" % (at + 1, 1)
    extension[504] = 1
    blocks = (MAX_HEADER_BYTES // tarfile.BLOCKSIZE) + 1
    data = tar_bytes([GOOD])[:1024] + checksummed(sparse) + bytes(extension) * blocks
    items = _listed(tmp_path, data + bytes(2 * tarfile.BLOCKSIZE))
    assert _names(items) == ["cat/0.jpg"]
    assert _reasons(items) == {"": Reason.CORRUPT_ARCHIVE}


@pytest.mark.parametrize(
    "pax", [{"GNU.sparse.map": "1,x"}, {"GNU.sparse.size": "many"}], ids=["map", "size"]
)
def test_a_pax_sparse_field_that_is_not_a_number_is_corrupt(tmp_path, pax):
    """tarfile converts these with a bare int(): a ValueError, which stopped the whole run."""
    sparse = tar_member("cat/s.jpg", IMAGE, pax_headers=pax)
    items = _listed(tmp_path, tar_bytes([GOOD, sparse], tarfile.PAX_FORMAT))
    assert _names(items) == ["cat/0.jpg"]
    assert _reasons(items) == {"": Reason.CORRUPT_ARCHIVE}


def _peak_rss_listing(path) -> tuple[int, int]:
    """(members listed, peak RSS in MB) of listing the tar at `path` in a process of its own."""
    # VmHWM, this process's own high-water mark: getrusage's ru_maxrss survives exec, so it
    # would count the test worker's memory at the fork (TensorFlow's, once another test ran).
    script = (
        "import re, sys\n"
        "from tfrecord_pipeline.transforms.archive.kinds import read_entries\n"
        "count = sum(1 for _ in read_entries(sys.argv[1]))\n"
        "status = open('/proc/self/status').read()\n"
        "print(count, int(re.search(r'VmHWM:\\s+(\\d+)', status)[1]) // 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True
    )
    count, peak_mb = map(int, done.stdout.split())
    return count, peak_mb


@pytest.mark.parametrize(
    "count", [10**5, pytest.param(10**6, marks=pytest.mark.slow)], ids=["1e5", "1e6"]
)
def test_a_tar_of_many_empty_members_lists_in_bounded_memory(tmp_path, count):
    path = empty_members_tar(tmp_path / "many.tar", count)
    listed, peak_mb = _peak_rss_listing(path)
    assert listed == count
    assert peak_mb < RSS_BOUND_MB


def test_a_long_name_header_declaring_a_gibibyte_is_not_read_whole(tmp_path):
    """A GNU long-name header's size is read by tarfile in one read: in a file of a GiB of
    holes, a GiB of memory for a name."""
    long_name = tarfile.TarInfo("././@LongLink")
    long_name.type, long_name.size = tarfile.GNUTYPE_LONGNAME, 1 << 30
    path = tmp_path / "long.tar"
    with open(path, "wb") as out:
        out.write(tar_bytes([GOOD])[:1024] + tar_header(long_name))
        out.truncate(1024 + 512 + (1 << 30) + 1024)  # holes: no disk taken
    listed, peak_mb = _peak_rss_listing(path)
    assert listed == 2  # cat/0.jpg, then the rest refused
    assert peak_mb < RSS_BOUND_MB


class _CountedReads(io.RawIOBase):
    """A file read through, its reads counted."""

    def __init__(self, path):
        super().__init__()
        self._file, self.reads = open(path, "rb", buffering=0), 0  # noqa: SIM115 - closed below

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer) -> int:
        self.reads += 1
        return self._file.readinto(buffer)

    def close(self) -> None:
        self._file.close()
        super().close()


def test_a_plain_members_header_is_listed_in_one_read(tmp_path):
    """tarfile reads the byte before each header, then the header: a plain file's header is
    read once (the first, and the end, are tarfile's)."""
    data = tar_bytes([tar_member(f"cat/{n}.jpg", IMAGE) for n in range(50)], tarfile.USTAR_FORMAT)
    (tmp_path / "x.tar").write_bytes(data)
    with _CountedReads(tmp_path / "x.tar") as stream:
        assert len(_names(tar_entries(stream, len(data), "x.tar"))) == 50
        assert stream.reads <= 50 + 4


def test_a_global_pax_header_is_applied_to_the_plain_headers_after_it(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT,
                      pax_headers={"mtime": "123"}) as tar:  # fmt: skip
        for info, image in [tar_member(f"cat/{n}.jpg", IMAGE) for n in range(3)]:
            tar.addfile(info, io.BytesIO(image))
    entries = [item for item in _listed(tmp_path, buffer.getvalue()) if isinstance(item, Entry)]
    assert [entry.member.identity for entry in entries] == [f"{len(IMAGE)}:123.0"] * 3
