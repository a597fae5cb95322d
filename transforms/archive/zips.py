"""A zip's members, listed from its central directory alone (zip64 included).

The directory is read as a stream, an entry at a time, so a zip of a million members lists in
the memory of one; each member's bytes are then one range of the file, found from its local
header when it is read (transforms/archive/members.py). A bomb cannot inflate past what its
entry declares (`read_member` stops one byte over), an entry declaring over --max_file_mb is
never read, and entries that overlap (the trick that makes a few kilobytes inflate to
petabytes) are refused: each member must begin after the one before it ends.
"""

import stat
import struct
from collections.abc import Iterator

from tfrecord_pipeline.transforms.archive.members import (
    DEFLATED,
    LOCAL_HEADER,
    STORED,
    Entry,
    Member,
    Refused,
)
from tfrecord_pipeline.transforms.errors import Reason

_CENTRAL = struct.Struct("<4s6H3I5H2I")
_END = struct.Struct("<4s4H2IH")
_END64_LOCATOR = struct.Struct("<4sIQI")
_END64 = struct.Struct("<4sQ2H2I4Q")
_ZIP64_EXTRA = 0x0001
_ENCRYPTED, _UTF8 = 0x1, 0x800
_UNIX = 3  # "version made by" host: its external attributes hold a Unix mode
_TAIL = _END.size + 0xFFFF  # the end record and the longest comment after it


class ZipDirectoryError(Exception):
    """The central directory cannot be found or read: the zip is refused whole."""


def zip_entries(stream, size: int, container: str) -> Iterator[Entry | Refused]:
    """Every member of the zip file `stream` of `size` bytes, in directory order."""
    try:
        count, start, length = _directory(stream, size)
    except ZipDirectoryError as error:
        yield Refused("", Reason.CORRUPT_ARCHIVE, f"not a readable zip ({error})")
        return
    stream.seek(start)
    ends_at = 0  # where the member before ends: the next must begin at or after it
    for number in range(count):
        fixed = stream.read(_CENTRAL.size)
        if len(fixed) < _CENTRAL.size or fixed[:4] != b"PK\x01\x02":
            message = f"its directory's entry {number:,} of {count:,} is unreadable"
            yield Refused("", Reason.CORRUPT_ARCHIVE, message)
            return
        fields = _CENTRAL.unpack(fixed)
        name_bytes = stream.read(fields[10])
        extra = stream.read(fields[11])
        stream.seek(fields[12], 1)  # the entry's comment
        entry = _entry(fields, name_bytes, extra, container, size, ends_at)
        if isinstance(entry, Entry) and entry.member.size >= 0:
            ends_at = entry.member.end
        if entry is not None:
            yield entry


def _entry(fields, name_bytes, extra, container, size, ends_at):
    made_by, flags, method, crc = fields[1], fields[3], fields[4], fields[7]
    stored, length, offset = fields[8], fields[9], fields[16]
    stored, length, offset = _zip64(extra, stored, length, offset)
    try:
        name = name_bytes.decode("utf-8")
    except UnicodeDecodeError:
        held = name_bytes.decode("utf-8", "backslashreplace")
        return Refused(held, Reason.BAD_MEMBER_NAME, "the member's name is not UTF-8")
    mode = fields[15] >> 16 if made_by >> 8 == _UNIX else 0
    if name.endswith("/") or stat.S_ISDIR(mode):
        return None
    if name.startswith("/") or ".." in name.replace("\\", "/").split("/"):
        return Refused(name, Reason.UNSAFE_MEMBER, "a member's name that leaves the archive")
    # A mode of permissions alone, no file type (zipfile's writestr: 0o600), is a file's.
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):
        return Refused(name, Reason.NOT_A_FILE, "a link or special member, not a regular file")
    if flags & _ENCRYPTED:
        return Refused(name, Reason.ENCRYPTED_MEMBER, "an encrypted member")
    if method not in (STORED, DEFLATED):
        return Refused(name, Reason.UNSUPPORTED_MEMBER, f"compression method {method}")
    header = LOCAL_HEADER.size + len(name_bytes) + len(extra)
    identity = f"{length}:{crc:08x}"  # known again by its size and CRC-32: its bytes'
    member = Member(container, offset, stored, length, method, crc, identity, header)
    if offset < ends_at:
        message = f"overlaps the member before it (begins at byte {offset:,})"
        return Refused(name, Reason.OVERLAPPING_MEMBER, message)
    if member.end > size:
        return Refused(name, Reason.CORRUPT_ARCHIVE, "the archive ends inside this member")
    return Entry(name, name, member)


def _zip64(extra: bytes, stored: int, length: int, offset: int) -> tuple[int, int, int]:
    """The sizes and offset an entry's zip64 extra field gives for those set to 0xFFFFFFFF."""
    at = 0
    while at + 4 <= len(extra):
        kind, field_size = struct.unpack_from("<2H", extra, at)
        if kind == _ZIP64_EXTRA:
            held = min(field_size, len(extra) - at - 4) // 8  # not past the extra's end
            values = iter(struct.unpack_from(f"<{held}Q", extra, at + 4))
            length = next(values, length) if length == 0xFFFFFFFF else length
            stored = next(values, stored) if stored == 0xFFFFFFFF else stored
            offset = next(values, offset) if offset == 0xFFFFFFFF else offset
            break
        at += 4 + field_size
    return stored, length, offset


def _directory(stream, size: int) -> tuple[int, int, int]:
    """(entries, where the central directory begins, its length), from the end record."""
    tail_start = max(0, size - _TAIL)
    stream.seek(tail_start)
    tail = stream.read(size - tail_start)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _END.size > len(tail):
        raise ZipDirectoryError("no end of central directory record")
    _, _, _, _, count, length, start, _ = _END.unpack_from(tail, at)
    locator_at = at - _END64_LOCATOR.size
    if locator_at >= 0 and tail[locator_at : locator_at + 4] == b"PK\x06\x07":
        end64_at = _END64_LOCATOR.unpack_from(tail, locator_at)[2]
        stream.seek(end64_at)
        record = stream.read(_END64.size)
        if len(record) < _END64.size or record[:4] != b"PK\x06\x06":
            raise ZipDirectoryError("a zip64 end record that is not there")
        count, length, start = _END64.unpack(record)[7:10]
    if start + length > size or count * _CENTRAL.size > length:
        raise ZipDirectoryError("a central directory past the end of the file")
    return count, start, length
