"""Hostile archives, made with tarfile and zipfile, and by byte surgery where a library will not
write the hostile thing (a negative size, an encrypted flag, a name that is not UTF-8, a lying
size, directory entries over the same bytes)."""

import io
import stat
import struct
import tarfile
import zipfile
from pathlib import Path

TAR_NAME = slice(0, 100)  # a tar header's name field
CENTRAL = b"PK\x01\x02"  # a zip's central directory entry
LOCAL = b"PK\x03\x04"  # a zip's local file header


def tar_member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, **fields):
    """A (TarInfo, bytes) pair for `tar_bytes`: a member of `kind` with `fields` set."""
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mtime = kind, len(data) if kind == tarfile.REGTYPE else 0, 1
    for field, value in fields.items():
        setattr(info, field, value)
    return info, data


def tar_bytes(members, fmt: int = tarfile.GNU_FORMAT) -> bytes:
    """A tar of `members` ((TarInfo, bytes) pairs), names written as raw bytes where they
    hold surrogate escapes (a name that is not UTF-8)."""
    buffer = io.BytesIO()
    with tarfile.open(
        fileobj=buffer, mode="w", format=fmt, encoding="utf-8", errors="surrogateescape"
    ) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def tar_header(info: tarfile.TarInfo) -> bytes:
    """One GNU header block for `info` as given, sizes no library would write included (a
    negative or 1 TiB size goes in base-256)."""
    return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")


def looping_tar(members) -> bytes:
    """A tar of `members` (three or more) whose last one's size, below zero in base-256,
    leads tarfile back to the second one's header: b, c, b, c... for ever, unless refused."""
    data = bytearray(tar_bytes(members))
    at = [0]
    for info, _ in members:
        at.append(
            at[-1] + tarfile.BLOCKSIZE + -(-info.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
        )
    last = members[-1][0]
    back = tarfile.TarInfo(last.name)
    back.mtime, back.size = last.mtime, at[1] - (at[-2] + tarfile.BLOCKSIZE)
    data[at[-2] : at[-2] + tarfile.BLOCKSIZE] = tar_header(back)
    return bytes(data)


def with_checksum(header: bytearray) -> bytes:
    """A header block patched by hand, its checksum made right again."""
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def nested_tar(depth: int, image: bytes) -> bytes:
    """A tar holding `level1.tar`, holding `level2.tar`... `depth` tars deep, the innermost
    holding cat/0.jpg."""
    data = tar_bytes([tar_member("cat/0.jpg", image)])
    for level in range(depth, 0, -1):
        data = tar_bytes([tar_member(f"level{level}.tar", data)])
    return data


def empty_members_tar(path: Path, count: int) -> Path:
    """A tar of `count` empty members (`e/<n>.jpg`): a header block each, written directly from
    one header tarfile made, its name and checksum set for each (tobuf's 20 µs a member would
    be most of a test's time at a million)."""
    info = tarfile.TarInfo("")
    info.mtime = 1
    template = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    template[148:156] = b" " * 8  # the checksum counts its own field as spaces
    unnamed = sum(template)
    with open(path, "wb") as out:
        for number in range(count):
            name = f"e/{number}.jpg".encode()
            header = bytearray(template)
            header[: len(name)] = name
            header[148:156] = b"%06o\0 " % (unnamed + sum(name))
            out.write(header)
        out.write(b"\0" * tarfile.RECORDSIZE)
    return path


def zip_bytes(members, compression: int = zipfile.ZIP_STORED, **options) -> bytes:
    """A zip of `members` ((name or ZipInfo, bytes) pairs) written by zipfile."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression, **options) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


def zip_link(name: str, target: str) -> zipfile.ZipInfo:
    """A zip entry that is a symbolic link (`zip --symlinks` makes them): a Unix mode."""
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def central_entries(data: bytes) -> list[int]:
    """Where each central directory entry begins."""
    at, found = data.find(CENTRAL), []
    while at >= 0:
        found.append(at)
        at = data.find(CENTRAL, at + 4)
    return found


def patch_headers(data: bytes, local_at: int, central_at: int, value: int, fmt: str) -> bytes:
    """`value` written at a field of every local header (`local_at`) and directory entry
    (`central_at`) alike: what both say of a member must agree."""
    patched = bytearray(data)
    for signature, field in ((LOCAL, local_at), (CENTRAL, central_at)):
        at = patched.find(signature)
        while at >= 0:
            struct.pack_into(fmt, patched, at + field, value)
            at = patched.find(signature, at + 4)
    return bytes(patched)


def encrypted(data: bytes) -> bytes:
    """Every member flagged encrypted (general purpose bit 0), as zipfile cannot write."""
    flags = struct.unpack_from("<H", data, data.find(LOCAL) + 6)[0]
    return patch_headers(data, 6, 8, flags | 1, "<H")


def lying_size(data: bytes, size: int) -> bytes:
    """Every member declaring `size` bytes inflated, whatever it inflates to (a bomb)."""
    return patch_headers(data, 22, 24, size, "<I")


def overlapping(data: bytes) -> bytes:
    """Every directory entry pointing at the first member's bytes (several entries over the
    same bytes, as in David Fifield's "better zip bomb")."""
    patched = bytearray(data)
    for at in central_entries(data):
        struct.pack_into("<I", patched, at + 42, 0)
    return bytes(patched)
