"""transforms/archive/headers.py: a plain file's tar header parsed by the shortcut is the TarInfo
tarfile's own parser makes of it, field for field, and any other header is tarfile's to parse
(or refuse) as it would."""

import io
import random
import tarfile

import pytest

from tfrecord_pipeline.transforms.archive.headers import QuickInfo, padded, pax_member, plain_member

FIELDS = list(tarfile.TarInfo.__slots__)  # every field frombuf may set; unset: None


def _outcome(cls, buf: bytes):
    try:
        info = cls.frombuf(buf, "utf-8", "surrogateescape")
    except tarfile.TarError as error:
        return type(error).__name__
    return {field: getattr(info, field, None) for field in FIELDS}


def _header(name: str, tar_format: int, **fields) -> bytes:
    info = tarfile.TarInfo(name)
    for field, value in fields.items():
        setattr(info, field, value)
    return info.tobuf(tar_format, "utf-8", "surrogateescape")[-tarfile.BLOCKSIZE :]


HEADERS = [
    ("cat/0001.jpg", tarfile.USTAR_FORMAT, {"size": 12345, "mtime": 1_700_000_000}),
    ("a/" * 60 + "long.jpg", tarfile.USTAR_FORMAT, {"size": 1}),  # a ustar prefix
    ("chats/été.jpg", tarfile.USTAR_FORMAT, {"uname": "ö", "gname": "g", "mode": 0o600}),
    ("big.jpg", tarfile.GNU_FORMAT, {"size": 8**11 - 1, "uid": 1000, "gid": 1000}),
    ("00001.cls", tarfile.PAX_FORMAT, {"size": 2}),
    ("v7folder/", tarfile.USTAR_FORMAT, {"type": tarfile.AREGTYPE}),
    ("folder", tarfile.USTAR_FORMAT, {"type": tarfile.DIRTYPE}),
    ("link.jpg", tarfile.USTAR_FORMAT, {"type": tarfile.SYMTYPE, "linkname": "0001.jpg"}),
    ("cont.jpg", tarfile.USTAR_FORMAT, {"type": tarfile.CONTTYPE, "size": 3}),
    ("huge.jpg", tarfile.GNU_FORMAT, {"size": 8**12}),  # base-256
]


def _pax_header(name: str, **fields) -> bytes:
    """The header of the pax records webdataset's TarWriter writes before every member (its
    float mtime needs one)."""
    info = tarfile.TarInfo(name)
    for field, value in fields.items():
        setattr(info, field, value)
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")[: tarfile.BLOCKSIZE]


PAX = _pax_header("000000.jpg", size=74260, mtime=1_795_965_163.478)


def test_a_pax_headers_own_header_is_parsed_by_the_shortcut_as_tarfile_does():
    assert QuickInfo._quick(PAX, "utf-8", "surrogateescape").type == tarfile.XHDTYPE
    assert _outcome(QuickInfo, PAX) == _outcome(tarfile.TarInfo, PAX)
    assert plain_member(PAX, 0, "utf-8", "surrogateescape") is None  # not a member: tarfile's


@pytest.mark.parametrize(("name", "tar_format", "fields"), HEADERS)
def test_each_kind_of_header_gives_tarfiles_own_tarinfo(name, tar_format, fields):
    buf = _header(name, tar_format, **fields)
    assert _outcome(QuickInfo, buf) == _outcome(tarfile.TarInfo, buf)


def _checksummed(buf: bytearray) -> bytes:
    buf[148:156] = b" " * 8
    buf[148:156] = b"%06o\0 " % sum(buf)
    return bytes(buf)


def test_damaged_headers_meet_the_same_end_as_in_tarfile():
    """Random bytes changed in plain files' headers, the checksum made right again or not: the
    same TarInfo, or the same refusal."""
    rng = random.Random(43)
    bases = [_header(name, form, **fields) for name, form, fields in HEADERS[:5]] + [PAX]
    for _ in range(3000):
        buf = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            buf[rng.randrange(512)] = rng.choice([0, 32, 48, 55, 56, 128, 255, rng.randrange(256)])
        buf = _checksummed(buf) if rng.random() < 0.8 else bytes(buf)
        assert _outcome(QuickInfo, buf) == _outcome(tarfile.TarInfo, buf), buf


def test_a_plain_member_is_the_member_tarfile_steps_to():
    """plain_member's TarInfo, offsets included, is tarfile's `next` for every plain member
    after the first (tarfile reads the first as it opens)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, size in (("a/0.jpg", 700), ("a/0.cls", 1), ("b/1.jpg", 512), ("b/1.cls", 0)):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.uname = size, 1_700_000_000 + size, "u"
            tar.addfile(info, io.BytesIO(bytes(size)))
    data = buffer.getvalue()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
    for member in members[1:]:
        block = data[member.offset : member.offset + tarfile.BLOCKSIZE]
        quick = plain_member(block, member.offset, "utf-8", "surrogateescape")
        fields = [*FIELDS, "offset", "offset_data"]
        assert [getattr(quick, f, None) for f in fields] == [
            getattr(member, f, None) for f in fields
        ]
        assert quick.offset_data + padded(quick.size) == member.offset_data + member._block(
            member.size
        )


def test_a_member_after_simple_pax_records_is_the_member_tarfile_steps_to():
    """As webdataset's TarWriter writes every member (a float mtime), and with a long name, a
    name and owner not ASCII, a size and ids in records: pax_member's TarInfo is tarfile's."""
    members = [
        ("000000.cls", {"mtime": 1_795_965_163.478}),
        ("000000.jpg", {"mtime": 1_795_965_163.5, "uname": "bigdata"}),
        ("d/" * 70 + "long.jpg", {}),
        ("chats/été.jpg", {"uname": "ö", "uid": 8**8}),
        ("plain.jpg", {}),
    ]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for number, (name, fields) in enumerate(members):
            info = tarfile.TarInfo(name)
            info.size = 100 * number + 1
            for field, value in fields.items():
                setattr(info, field, value)
            tar.addfile(info, io.BytesIO(bytes(info.size)))
    data = buffer.getvalue()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        listed = tar.getmembers()

    def read(offset: int, size: int) -> bytes:
        return data[offset : offset + size] if offset + size <= len(data) else b""

    fields = [*FIELDS, "offset", "offset_data"]
    for member in listed[1:]:
        block = read(member.offset, tarfile.BLOCKSIZE)
        quick = pax_member(block, member.offset, read, "utf-8", "surrogateescape")
        if member.pax_headers:
            assert [getattr(quick, f, None) for f in fields] == [
                getattr(member, f, None) for f in fields
            ]
        else:
            assert quick is None  # plain_member's
