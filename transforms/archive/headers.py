"""A tar member's header parsed fast where it is the plain kind: `tarfile` parses every field of
every header in Python (some 37 µs a member: most of what listing a tar costs, two members a
WebDataset sample), where a regular file's ustar header needs one checksum and a few fields.

`QuickInfo` is tarfile's own TarInfo with that one shortcut; any other header (a link, a
folder, a GNU or pax extension, a base-256 number, a signed checksum, anything that does not
parse) goes to tarfile's parser, unchanged, which raises what it raises. The shortcut gives the
TarInfo tarfile would give, field for field (tests/test_headers.py compares them).

`plain_member` goes one step further for a listing (transforms/archive/tars.py): a plain file's
header, read in one read, is the member tarfile's `next` would give, offsets and all, without
tarfile's stepping (a read of the byte before each header, its own read of the header).
"""

import tarfile
import zlib

_USTAR = (b"ustar\x0000", b"ustar  \x00")  # POSIX and GNU magic and version
_FILES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE)
_SPACES = 8 * ord(" ")  # the checksum field counts as spaces in its own sum


def _text(field: bytes, encoding: str, errors: str) -> str:
    return field.split(b"\0", 1)[0].decode(encoding, errors)


def _number(field: bytes) -> int:
    """An octal field as tarfile reads it; ValueError for anything else, base-256 and bytes
    that are not ASCII digits included (then tarfile says)."""
    return int(field.split(b"\0", 1)[0].strip() or b"0", 8)


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
        kind = buf[156:157]
        if len(buf) != tarfile.BLOCKSIZE or buf[257:265] not in _USTAR or kind not in _FILES:
            raise ValueError("not a plain file's ustar header")
        chksum = _number(buf[148:156])
        if chksum != _byte_sum(buf) - sum(buf[148:156]) + _SPACES:
            raise ValueError("a checksum tarfile may take as signed, or refuse")
        obj = cls()
        obj.name = _text(buf[0:100], encoding, errors)
        if kind == tarfile.AREGTYPE and obj.name.endswith("/"):
            raise ValueError("a v7 folder")
        obj.mode, obj.uid, obj.gid = (_number(buf[at : at + 8]) for at in (100, 108, 116))
        obj.size, obj.mtime = _number(buf[124:136]), _number(buf[136:148])
        obj.chksum, obj.type = chksum, kind
        obj.linkname = _text(buf[157:257], encoding, errors)
        obj.uname = _text(buf[265:297], encoding, errors)
        obj.gname = _text(buf[297:329], encoding, errors)
        obj.devmajor, obj.devminor = _number(buf[329:337]), _number(buf[337:345])
        prefix = _text(buf[345:500], encoding, errors)
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
    info.offset, info.offset_data = offset, offset + tarfile.BLOCKSIZE
    return info


def padded(size: int) -> int:
    """A member's bytes rounded up to whole blocks, as tarfile steps over them."""
    blocks, remainder = divmod(size, tarfile.BLOCKSIZE)
    return (blocks + bool(remainder)) * tarfile.BLOCKSIZE
