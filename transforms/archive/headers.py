"""A tar member's header parsed fast where it is the plain kind: `tarfile` parses every field of
every header in Python (some 37 µs a member: most of what listing a tar costs, two members a
WebDataset sample), where a regular file's ustar header needs one checksum and a few fields.

`QuickInfo` is tarfile's own TarInfo with that one shortcut, taken too for a pax header's own
header (its records are tarfile's to read); any other header (a link, a folder, a GNU
extension, a base-256 number, a signed checksum, anything that does not parse) goes to
tarfile's parser, unchanged, which raises what it raises. The shortcut gives the TarInfo
tarfile would give, field for field (tests/test_headers.py compares them).

`plain_member` goes one step further for a listing (transforms/archive/tars.py): a plain file's
header, read in one read, is the member tarfile's `next` would give, offsets and all, without
tarfile's stepping (a read of the byte before each header, its own read of the header).
"""

import struct
import tarfile
import zlib

_USTAR = (b"ustar\x0000", b"ustar  \x00")  # POSIX and GNU magic and version
_FILES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE)
# Headers tarfile's frombuf parses as a file's: the files', and a pax header's own (whose
# records _proc_pax reads after), which webdataset's TarWriter writes before every member.
_PLAIN = (*_FILES, tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)
_SPACES = 8 * ord(" ")  # the checksum field counts as spaces in its own sum
# A ustar header's fields, split in one call: name; mode, uid, gid, size, mtime; chksum, type,
# linkname, magic and version, uname, gname; devmajor, devminor; prefix, and 12 bytes unused.
_HEADER = struct.Struct("100s8s8s8s12s12s8sc100s8s32s32s8s8s155s12x")


def _text(field: bytes, encoding: str, errors: str) -> str:
    return field.split(b"\0", 1)[0].decode(encoding, errors)


def _number(field: bytes) -> int:
    """An octal field as tarfile reads it; ValueError for anything else, base-256 and bytes
    that are not ASCII digits included, and blanks alone (then tarfile says: 0)."""
    return int(field.partition(b"\0")[0] or b"0", 8)


def _byte_sum(block: bytes) -> int:
    """The sum of a header's 512 bytes, from two Adler-32s: the low half of one is 1 + the sum
    of its bytes modulo 65,521, and 256 bytes sum to 65,280 at most, so each half's is exact
    (a fifth of `sum`'s time, a loop over 512 ints)."""
    low = zlib.adler32(block[:256]) & 0xFFFF
    return low + (zlib.adler32(block[256:]) & 0xFFFF) - 2


class QuickInfo(tarfile.TarInfo):
    @classmethod
    def frombuf(cls, buf, encoding, errors):
        try:
            return cls._quick(buf, encoding, errors)
        except (ValueError, UnicodeDecodeError, IndexError):
            return super().frombuf(buf, encoding, errors)

    @classmethod
    def _quick(cls, buf, encoding, errors):
        if (
            len(buf) != tarfile.BLOCKSIZE
            or buf[257:265] not in _USTAR
            or buf[156:157] not in _PLAIN
        ):
            raise ValueError("not a plain file's or pax ustar header")
        fields = _HEADER.unpack(buf)
        name, mode, uid, gid, size, mtime, chksum, kind, linkname = fields[:9]
        uname, gname, devmajor, devminor, prefix = fields[10:]
        checksum = _number(chksum)
        if checksum != _byte_sum(buf) - sum(chksum) + _SPACES:
            raise ValueError("a checksum tarfile may take as signed, or refuse")
        obj = cls()
        obj.name = _text(name, encoding, errors)
        if kind == tarfile.AREGTYPE and obj.name.endswith("/"):
            raise ValueError("a v7 folder")
        obj.mode, obj.uid, obj.gid = _number(mode), _number(uid), _number(gid)
        obj.size, obj.mtime = _number(size), _number(mtime)
        obj.devmajor, obj.devminor = _number(devmajor), _number(devminor)
        obj.chksum, obj.type = checksum, kind
        obj.linkname = _text(linkname, encoding, errors)
        obj.uname = _text(uname, encoding, errors)
        obj.gname = _text(gname, encoding, errors)
        prefix = _text(prefix, encoding, errors)
        if prefix:
            obj.name = prefix + "/" + obj.name
        return obj


def plain_member(block: bytes, offset: int, encoding: str, errors: str) -> QuickInfo | None:
    """The member whose header is `block` (at `offset` of its tar), as tarfile's `next` gives it,
    when it is a plain file's ustar header; else None (tarfile's to read). Only where no global
    pax header came before: tarfile would apply its fields."""
    try:
        info = QuickInfo._quick(block, encoding, errors)
    except (ValueError, UnicodeDecodeError, IndexError):
        return None
    if info.type not in _FILES:
        return None  # a pax header: tarfile reads its records and the header they extend
    info.offset, info.offset_data = offset, offset + tarfile.BLOCKSIZE
    return info


def padded(size: int) -> int:
    """A member's bytes rounded up to whole blocks, as tarfile steps over them."""
    blocks, remainder = divmod(size, tarfile.BLOCKSIZE)
    return (blocks + bool(remainder)) * tarfile.BLOCKSIZE


# Pax records read here, not by tarfile, when all are of this simple kind: a pax header of no
# more than PAX_BYTES, each record `<length> <keyword>=<value>\n` exactly, in UTF-8, its
# numbers numbers, no charset or GNU keyword, before a plain file's header; any other is
# tarfile's (_proc_pax).
PAX_BYTES = 1 << 16


def pax_member(block: bytes, offset: int, read, encoding: str, errors: str) -> QuickInfo | None:
    """The plain file that a pax header (`block`, at `offset`) extends, as tarfile's `next`
    gives it, its records applied; `read(offset, size)` reads bytes of the tar. None for any
    other header, records or member: tarfile's to read."""
    try:
        pax = QuickInfo._quick(block, encoding, errors)
    except (ValueError, UnicodeDecodeError, IndexError):
        return None
    if pax.type != tarfile.XHDTYPE or not 0 < pax.size <= PAX_BYTES:
        return None
    stored = padded(pax.size)
    data = read(offset + tarfile.BLOCKSIZE, stored + tarfile.BLOCKSIZE)
    records = _pax_records(data[: pax.size])
    if (
        records is None
        or b"hdrcharset=" in data  # tarfile looks for it anywhere in the records' blocks
        or len(data) != stored + tarfile.BLOCKSIZE
        or data[pax.size : stored].strip(b"\0")
    ):
        return None
    member = plain_member(data[stored:], offset + tarfile.BLOCKSIZE + stored, encoding, errors)
    if member is None:
        return None
    try:
        for keyword, value in records.items():  # as TarInfo._apply_pax_info
            if keyword in tarfile.PAX_NUMBER_FIELDS and keyword in tarfile.PAX_FIELDS:
                setattr(member, keyword, tarfile.PAX_NUMBER_FIELDS[keyword](value))
            elif keyword in tarfile.PAX_FIELDS:
                setattr(member, keyword, value.rstrip("/") if keyword == "path" else value)
    except ValueError:
        return None  # a number that is not one: tarfile's to say
    member.pax_headers, member.offset = records, offset
    return member


def _pax_records(data: bytes) -> dict | None:
    """Pax records of the simple kind, text by keyword; None for any other."""
    records: dict = {}
    at = 0
    while at < len(data):
        space = data.find(b" ", at)
        if space < 0 or not data[at:space].isdigit():
            return None
        end = at + int(data[at:space])
        equals = data.find(b"=", space)
        if end > len(data) or not space + 1 < equals < end - 1 or data[end - 1 : end] != b"\n":
            return None
        try:
            keyword = data[space + 1 : equals].decode("utf-8")
            value = data[equals + 1 : end - 1].decode("utf-8")
        except ValueError:
            return None
        if keyword == "hdrcharset" or keyword.startswith("GNU."):
            return None
        records[keyword] = value
        at = end
    return records
