"""An archive member as an image file: where its bytes are, and reading them.

A member is read where it lies, never unpacked: a tar member's bytes are a byte range of its
archive (of the outer archive, for a tar inside a tar), a zip member's a range that inflates
to its size. So a row of an archive is read like a loose file, one read of its own range,
by whichever shard writer holds it: the shards are those the same images as loose files give.
"""

import os
import posixpath
import struct
import zlib
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.storage import disk, fileio, held_files, remote

STORED, DEFLATED = 0, 8  # zip compression methods read; tar members are stored
MEMBER_MARK = "#"  # `archive.tar#member`: a member of an archive, as a manifest names it
LOCAL_HEADER = struct.Struct("<4s5H3I2H")  # a zip's local file header, before name and extra
ARCHIVE_SUFFIXES = (".tar", ".zip")  # what names an archive in a member's URI


def archive_name(path: str) -> str:
    """An archive's file name: what its members' keys begin with (`member_key`)."""
    return posixpath.basename(path.rstrip("/"))


def member_key(archive: str, member: str) -> str:
    """The key of a member's row: its archive's file name, MEMBER_MARK, the member's path."""
    return f"{archive}{MEMBER_MARK}{member}"


def key_archive(key: str) -> str:
    """The archive file name a member's key begins with; "" for a key of no member."""
    name, mark, _ = key.partition(MEMBER_MARK)
    return name if mark else ""


class Member(NamedTuple):
    """Where one member's bytes are, and what a refresh knows it by without reading it
    (`identity`: a tar member's size and time, a zip member's size and CRC-32), so a rewritten
    archive converts only the members that changed."""

    container: str  # the archive file whose bytes hold it (the outer one, for nested tars)
    offset: int  # where its stored bytes begin
    stored: int  # its stored bytes (compressed, for a deflated zip member)
    size: int  # its bytes as read
    method: int = STORED
    crc: int = -1  # a zip member's CRC-32, checked on reading; -1: none (tar)
    identity: str = ""
    # A zip member's: the bytes of its local header (as its directory entry foretells them),
    # read with its data in one request; `offset` is where the header begins.
    header: int = 0
    # The container's fileio.identity when it was listed: a local archive rewritten since is
    # not read at offsets that may now hold another member.
    listed: str = ""
    # With --archive_order keep: (its archive's size, the run's manifests), which place it in
    # the run's order (transforms/plan/sharding.py kept_point); () when mixed by key hash.
    kept: tuple[int, int] = ()

    @property
    def end(self) -> int:
        return self.offset + self.header + self.stored


class Entry(NamedTuple):
    """A regular file in an archive: its name ('/'-separated; a nested tar's members under a
    folder named for it), the name as the archive holds it (for its URI), where its bytes are,
    and, when the listing was asked for them (a WebDataset sample's label), the bytes."""

    name: str
    held_as: str
    member: Member
    data: bytes | None = None


class Refused(NamedTuple):
    """A member (or, `held_as` "", the rest of the archive) that cannot be an image file."""

    held_as: str
    reason: Reason
    message: str


def listed_identity(path: str) -> str:
    """What `Member.listed` holds for an archive: a local file's identity (an object's reads
    are not checked yet)."""
    return "" if fileio.is_remote(path) else fileio.identity(path)


def check_size(member: Member, uri: str, max_bytes: int) -> None:
    """RowError when the member is over `max_bytes` as read or as stored: it is never read (a
    small size declared over huge stored bytes would be read whole)."""
    largest = max(member.size, member.stored)
    if largest > max_bytes:
        raise RowError(
            Reason.FILE_TOO_LARGE,
            f"{uri}: {largest:,} bytes, over the limit of {max_bytes:,} bytes (--max_file_mb)",
        )


def read_member(member: Member, uri: str, max_bytes: int, raw: bytes | None = None) -> bytes:
    """The member's bytes (from `raw`, its stored bytes [offset, end) when read already, else
    read here); RowError when it is over `max_bytes` (never read), lies past its archive's
    end, or does not inflate to its size and CRC (a zip bomb's lying header)."""
    check_size(member, uri, max_bytes)
    data = raw
    if data is None:
        data = _read_range(member.container, member.offset, member.end, member.listed)
    if data is None:
        message = f"{uri}: the archive changed after it was listed; convert again"
        raise RowError(Reason.CHANGED_ARCHIVE, message)
    if member.header:
        data = _after_local_header(data, member, uri)
    if len(data) != member.stored:
        raise RowError(Reason.CORRUPT_ARCHIVE, f"{uri}: the archive ends inside this member")
    if member.method == DEFLATED:
        data = _inflated(data, member.size, uri)
    if member.crc >= 0 and zlib.crc32(data) != member.crc:
        raise RowError(Reason.CORRUPT_ARCHIVE, f"{uri}: the member's CRC-32 does not match")
    return data


def _after_local_header(data: bytes, member: Member, uri: str) -> bytes:
    """A zip member's stored bytes, from its local header and what follows it; a header whose
    name and extra field are longer than its directory entry's takes a second read."""
    if len(data) < LOCAL_HEADER.size or data[:4] != b"PK\x03\x04":
        raise RowError(Reason.CORRUPT_ARCHIVE, f"{uri}: no local header where its entry says")
    *_, name_length, extra_length = LOCAL_HEADER.unpack_from(data)
    start = LOCAL_HEADER.size + name_length + extra_length
    if start + member.stored > len(data):
        tail = member.offset + len(data)
        data += _read_range(member.container, tail, member.offset + start + member.stored) or b""
    return data[start : start + member.stored]


def _inflated(data: bytes, size: int, uri: str) -> bytes:
    """Raw deflate data inflated to no more than `size` + 1 bytes: a member that inflates
    to more than its header says is refused once one byte over, not inflated whole."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, size + 1)
    except zlib.error as error:
        raise RowError(Reason.CORRUPT_ARCHIVE, f"{uri}: cannot inflate: {error}") from None
    if len(out) != size or not inflater.eof:
        raise RowError(Reason.CORRUPT_ARCHIVE, f"{uri}: inflates to other than its {size:,} bytes")
    return out


def _read_range(path: str, start: int, end: int, listed: str = "") -> bytes | None:
    """Bytes [start, end) of a local file (one positioned read: an archive listed in place is
    held open, held_files.py) or an object (one ranged request); None when the local file's
    identity is no longer `listed`."""
    if end <= start:
        return b""
    if fileio.is_remote(path):
        return remote.read_range(path, start, end)
    if listed:
        return held_files.read_listed(path, start, end, listed)
    descriptor, _ = disk.open_regular(path)  # a staged copy (unpack.py), deleted after the run
    try:
        return os.pread(descriptor, end - start, start)
    finally:
        os.close(descriptor)


def split_member_uri(uri: str) -> tuple[str, str] | None:
    """(archive, member) of `archive#member` when the archive part names an archive file by
    its suffix; None for any other path (a loose file may have `#` in its name)."""
    cut = 0
    while (cut := uri.find(MEMBER_MARK, cut + 1)) > 0:
        if uri[:cut].lower().endswith(ARCHIVE_SUFFIXES):
            return uri[:cut], uri[cut + 1 :]
    return None
