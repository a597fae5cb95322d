"""transforms/archive/zips.py on hostile zips made with zipfile and byte surgery: names that
leave the archive or are not UTF-8, links, encrypted and unsupported members, entries over the
same bytes, zip64 (forced, in a directory entry, and past 65,535 members), and zips cut short."""

import io
import struct
import zipfile

import pytest
from archive_data import (
    central_entries,
    encrypted,
    overlapping,
    patch_headers,
    zip_bytes,
    zip_link,
)

from tfrecord_pipeline.transforms.archive.members import Entry, Refused, read_member
from tfrecord_pipeline.transforms.archive.zips import zip_entries
from tfrecord_pipeline.transforms.errors import Reason

IMAGE = b"\xff\xd8 a jpeg's bytes \xff\xd9" * 20
GOOD = ("cat/0.jpg", IMAGE)


def _listed(tmp_path, data: bytes) -> list:
    path = tmp_path / "x.zip"
    path.write_bytes(data)
    with open(path, "rb", buffering=0) as stream:
        return list(zip_entries(stream, len(data), str(path)))


def _reasons(items) -> dict[str, Reason]:
    return {item.held_as: item.reason for item in items if isinstance(item, Refused)}


def _read(items) -> dict[str, bytes]:
    """Every listed member's bytes, read as a shard writer reads them."""
    return {
        item.name: read_member(item.member, item.name, 1 << 20)
        for item in items
        if isinstance(item, Entry)
    }


def test_names_that_leave_the_archive_are_unsafe(tmp_path):
    bad = ["../evil.jpg", "/etc/evil.jpg", "cat/../../evil.jpg", "..\\evil.jpg"]
    items = _listed(tmp_path, zip_bytes([(n, IMAGE) for n in bad] + [GOOD]))
    assert _reasons(items) == dict.fromkeys(bad, Reason.UNSAFE_MEMBER)
    assert _read(items) == {"cat/0.jpg": IMAGE}


def test_a_link_is_not_a_file(tmp_path):
    items = _listed(tmp_path, zip_bytes([GOOD, (zip_link("cat/l.jpg", "/etc/passwd"), b"")]))
    assert _reasons(items) == {"cat/l.jpg": Reason.NOT_A_FILE}


def test_an_encrypted_member_is_refused(tmp_path):
    items = _listed(tmp_path, encrypted(zip_bytes([GOOD])))
    assert _reasons(items) == {"cat/0.jpg": Reason.ENCRYPTED_MEMBER}


def test_a_compression_method_not_read_is_unsupported(tmp_path):
    items = _listed(tmp_path, zip_bytes([GOOD], zipfile.ZIP_BZIP2))
    assert _reasons(items) == {"cat/0.jpg": Reason.UNSUPPORTED_MEMBER}


def test_entries_over_the_same_bytes_are_refused_but_the_first(tmp_path):
    data = overlapping(
        zip_bytes([("cat/0.jpg", IMAGE), ("cat/1.jpg", IMAGE), ("cat/2.jpg", IMAGE)])
    )
    items = _listed(tmp_path, data)
    assert _read(items) == {"cat/0.jpg": IMAGE}
    assert _reasons(items) == dict.fromkeys(["cat/1.jpg", "cat/2.jpg"], Reason.OVERLAPPING_MEMBER)


def test_a_name_that_is_not_utf8_without_the_utf8_flag_is_refused(tmp_path):
    data = zip_bytes([("cat/caf_.jpg", IMAGE), GOOD]).replace(b"caf_", b"caf\x82")
    items = _listed(tmp_path, data)
    assert _reasons(items) == {"cat/caf\\x82.jpg": Reason.BAD_MEMBER_NAME}
    assert _read(items) == {"cat/0.jpg": IMAGE}


def test_a_mode_of_permissions_alone_is_a_regular_file(tmp_path):
    """zipfile's writestr gives a member the mode 0o600, no file type: every member of such
    a zip was refused as not_a_file."""
    data = zip_bytes([GOOD])
    assert zipfile.ZipFile(io.BytesIO(data)).infolist()[0].external_attr >> 16 == 0o600
    assert _read(_listed(tmp_path, data)) == {"cat/0.jpg": IMAGE}


def test_a_utf8_name_is_read(tmp_path):
    items = _listed(tmp_path, zip_bytes([("chat/café.jpg", IMAGE)], zipfile.ZIP_DEFLATED))
    assert _read(items) == {"chat/café.jpg": IMAGE}


def test_a_forced_zip64_zip_is_read(tmp_path):
    path = tmp_path / "z64.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in ("cat/0.jpg", "cat/1.jpg"):
            with archive.open(name, "w", force_zip64=True) as member:
                member.write(IMAGE)
    items = _listed(tmp_path, path.read_bytes())
    assert _read(items) == {"cat/0.jpg": IMAGE, "cat/1.jpg": IMAGE}


def _with_zip64_extra(data: bytes, values: bytes, declared: int) -> bytes:
    """The first directory entry's sizes set to 0xFFFFFFFF and given in a zip64 extra field
    that declares `declared` bytes and holds `values`."""
    at = central_entries(data)[0]
    patched = bytearray(data)
    name_length = struct.unpack_from("<H", patched, at + 28)[0]
    extra = struct.pack("<2H", 1, declared) + values
    struct.pack_into("<2I", patched, at + 20, 0xFFFFFFFF, 0xFFFFFFFF)
    struct.pack_into("<H", patched, at + 30, len(extra))
    patched[at + 46 + name_length : at + 46 + name_length] = extra
    end = patched.find(b"PK\x05\x06")
    struct.pack_into(
        "<I", patched, end + 12, struct.unpack_from("<I", patched, end + 12)[0] + len(extra)
    )
    return bytes(patched)


def test_a_zip64_extra_field_gives_the_sizes(tmp_path):
    size = struct.pack("<Q", len(IMAGE))
    items = _listed(tmp_path, _with_zip64_extra(zip_bytes([GOOD]), size + size, 16))
    assert _read(items) == {"cat/0.jpg": IMAGE}


def test_a_zip64_extra_field_shorter_than_it_says_is_corrupt(tmp_path):
    """It was unpacked as long as it says it is: a struct.error, which stopped the run."""
    data = _with_zip64_extra(zip_bytes([GOOD]), struct.pack("<Q", len(IMAGE)), 16)
    items = _listed(tmp_path, data)
    assert _reasons(items) == {"cat/0.jpg": Reason.CORRUPT_ARCHIVE}


def test_a_zip_of_more_than_65535_members_lists_every_one(tmp_path):
    count = 0x10000 + 5
    data = zip_bytes([(f"pad/{n}.dat", b"") for n in range(count)] + [GOOD])
    assert b"PK\x06\x06" in data  # a zip64 end record: 16 bits cannot count them
    items = _listed(tmp_path, data)
    assert len(items) == count + 1
    assert _read(items[-1:]) == {"cat/0.jpg": IMAGE}


@pytest.mark.parametrize("cut", [0.5, 0.95], ids=["in-a-member", "in-the-directory"])
def test_a_zip_cut_short_is_refused_whole(tmp_path, cut):
    data = zip_bytes([GOOD, ("cat/1.jpg", IMAGE)])
    items = _listed(tmp_path, data[: int(len(data) * cut)])
    assert [(i.held_as, i.reason) for i in items] == [("", Reason.CORRUPT_ARCHIVE)]


def test_garbage_named_zip_is_refused_whole(tmp_path):
    items = _listed(tmp_path, bytes(range(256)) * 8)
    assert [(i.held_as, i.reason) for i in items] == [("", Reason.CORRUPT_ARCHIVE)]


def test_a_member_whose_bytes_run_past_the_directory_is_corrupt(tmp_path):
    data = patch_headers(zip_bytes([GOOD]), 18, 20, 1 << 30, "<I")  # stored: 1 GiB
    items = _listed(tmp_path, data)
    assert _reasons(items) == {"cat/0.jpg": Reason.CORRUPT_ARCHIVE}
