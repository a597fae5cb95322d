"""A tar's members, listed from its headers alone (ustar, pax and GNU, as `tarfile` reads them).

Listing seeks from header to header: a local tar's image bytes are not read, an object's are
read once as one stream of large ranged reads (transforms/storage/range_reader.py). A tar
inside the tar (ImageNet's train tar holds one per class) is listed in place, its members under
a folder named for it, down to MAX_NESTING. Nothing here trusts a header: a member that is not
a regular file, has a name that is not UTF-8 or leaves the archive (`..`, `/`), or runs past
the end (or, by a size below zero, back before itself) is `Refused`, and a header that cannot be
read (or a member's headers over MAX_HEADER_BYTES) refuses the rest of the archive. Each member
is forgotten once listed, so a tar of a million members lists in the memory of one.
"""

import io
import posixpath
import tarfile
from collections.abc import Callable, Iterator

from tfrecord_pipeline.transforms.archive.headers import (
    QuickInfo,
    padded,
    pax_member,
    plain_member,
)
from tfrecord_pipeline.transforms.archive.members import Entry, Member, Refused
from tfrecord_pipeline.transforms.errors import Reason

Keep = Callable[[str, int], bool]  # which members a listing reads: (name, size) -> yes
MAX_NESTING = 2  # tars in a tar in a tar are listed; one level deeper is refused
BLOCK = tarfile.BLOCKSIZE
# The most a member's headers (its long name, pax records, sparse map) are read for: tarfile
# reads a long name or pax header whole, in one read of the size it declares, and keeps a sparse
# map of any length, 3 bytes of memory for every byte of it.
MAX_HEADER_BYTES = 16 << 20
# What tarfile raises on a header it cannot parse: its own errors, and bare ones from its sparse
# and pax parsers (an extension block cut short, `int()` of a field that is not a number).
UNREADABLE = (tarfile.TarError, EOFError, ValueError, IndexError)


class Window(io.RawIOBase):
    """Bytes [start, start + size) of a seekable stream, as a stream of their own: a nested
    tar read in place, which cannot read on into its outer archive's next member. tarfile
    reads nothing through it but headers: `budget` is what the next member's may still take."""

    def __init__(self, stream, start: int, size: int):
        super().__init__()
        self._stream, self._start, self._size, self._at = stream, start, size, 0
        self.budget = MAX_HEADER_BYTES

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        self._at = max(0, base + offset)
        return self._at

    def read(self, size: int = -1) -> bytes:
        left = max(0, self._size - self._at)
        size = left if size is None or size < 0 else min(size, left)
        if size > self.budget:
            raise tarfile.ReadError(f"a member's headers over {MAX_HEADER_BYTES:,} bytes")
        self.budget -= size
        if not size:
            return b""
        self._stream.seek(self._start + self._at)
        data = self._stream.read(size)
        self._at += len(data)
        return data

    def block(self, offset: int, size: int = BLOCK) -> bytes:
        """The `size` bytes of headers at `offset`, in one read; b"" where fewer are left."""
        if offset < 0 or offset + size > self._size:
            return b""
        self._stream.seek(self._start + offset)
        return self._stream.read(size)

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def tar_entries(
    stream, size: int, container: str, base: int = 0, depth: int = 0, keep: Keep | None = None
) -> Iterator[Entry | Refused]:
    """Every member of the tar at bytes [base, base + size) of `stream` (the archive file
    `container`), in archive order; those `keep(name, size)` asks for with their bytes, read
    as the listing passes them (on an object store, no request of their own)."""
    window = Window(stream, base, size)
    try:
        tar = tarfile.open(  # noqa: SIM115 - closing it would close nothing of ours
            fileobj=window,
            mode="r:",
            encoding="utf-8",
            errors="surrogateescape",
            tarinfo=QuickInfo,
        )
    except UNREADABLE as error:
        yield Refused("", Reason.CORRUPT_ARCHIVE, f"not a readable tar ({error})")
        return
    while True:
        window.budget = MAX_HEADER_BYTES
        try:
            info = _next(tar, window)
        except UNREADABLE as error:  # a header cut short, or one tarfile cannot parse
            yield Refused("", Reason.CORRUPT_ARCHIVE, f"cut short at byte {tar.offset:,} ({error})")
            return
        if info is None:
            break
        yield from _member(info, stream, size, container, base, depth, keep)
        if info.size < 0 or info.isreg() and info.offset_data + info.size > size:
            return  # its bytes run past the end, or back before it: nothing can follow
    end = _end_of_archive(window, tar.offset)
    if end is not None:
        yield end


def _next(tar: tarfile.TarFile, window: Window) -> tarfile.TarInfo | None:
    """`tar.next()`: a plain file's header after the first read here in one read
    (headers.py `plain_member`), or with the simple pax records before it (`pax_member`: a
    WebDataset shard's every member), any other by tarfile, which steps on from `tar.offset`."""
    if tar.firstmember is None and not tar.pax_headers:
        block = window.block(tar.offset)
        info = plain_member(block, tar.offset, tar.encoding, tar.errors) or pax_member(
            block, tar.offset, window.block, tar.encoding, tar.errors
        )
        if info is not None:
            tar.offset = info.offset_data + padded(info.size)
            return info
    info = tar.next()
    tar.members.clear()  # tarfile keeps every member it lists; one is held at a time
    return info


def _member(info: tarfile.TarInfo, stream, size, container, base, depth, keep):
    name = info.name
    refused = refusal(info)
    if refused:
        yield Refused(shown_name(name), *refused)
        return
    if info.size < 0:  # in base-256: tarfile would go back to an earlier header, and loop
        yield Refused(name, Reason.CORRUPT_ARCHIVE, f"a size below zero ({info.size:,})")
        return
    if info.isdir():
        return
    if info.offset_data + info.size > size:
        yield Refused(name, Reason.CORRUPT_ARCHIVE, "the archive ends inside this member")
        return
    start = base + info.offset_data
    if name.lower().endswith(".tar"):
        if depth + 1 > MAX_NESTING:
            message = f"a tar nested over {MAX_NESTING} deep is not read"
            yield Refused(name, Reason.NESTED_TOO_DEEP, message)
            return
        folder = posixpath.splitext(clean(name))[0]
        for item in tar_entries(stream, info.size, container, start, depth + 1, keep):
            held = f"{name}#{item.held_as}" if item.held_as else name
            if isinstance(item, Entry):
                yield item._replace(name=f"{folder}/{item.name}", held_as=held)
            else:
                yield item._replace(held_as=held)
        return
    # Known again, as a loose file is, by its size and modification time (its header's).
    identity = f"{info.size}:{info.mtime}"
    member = Member(container, start, info.size, info.size, identity=identity)
    cleaned, data = clean(name), None
    if keep is not None and keep(cleaned, info.size):
        stream.seek(start)
        data = stream.read(info.size)
    yield Entry(cleaned, name, member, data)


def shown_name(name: str) -> str:
    """A name as an error row can hold it: bytes that are not UTF-8 (which tarfile hands
    back as lone surrogates, unwritable as UTF-8) shown as escapes."""
    raw = name.encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "backslashreplace")


def clean(name: str) -> str:
    """A member's name as its path below the archive: no leading `./` or `/`."""
    return name.removeprefix("./").strip("/")


def refusal(info: tarfile.TarInfo) -> tuple[Reason, str] | None:
    """Why a member cannot be an image file (its name or its kind), or None: one rule for a
    tar listed in place and a compressed one unpacked (transforms/archive/gzipped.py)."""
    return _refused_name(info.name) or _refused_kind(info)


def _refused_name(name: str) -> tuple[Reason, str] | None:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return Reason.BAD_MEMBER_NAME, "the member's name is not UTF-8"
    if name.startswith("/") or ".." in name.split("/"):
        return Reason.UNSAFE_MEMBER, "a member's name that leaves the archive (/ or ..)"
    return None


def _refused_kind(info: tarfile.TarInfo) -> tuple[Reason, str] | None:
    if info.isreg() and info.sparse is None or info.isdir():
        return None
    if info.issym() or info.islnk():
        return Reason.NOT_A_FILE, f"a link to {info.linkname!r}, not a regular file"
    if info.sparse is not None:
        return Reason.UNSUPPORTED_MEMBER, "a sparse file"
    return Reason.NOT_A_FILE, "a device, FIFO or other special member, not a regular file"


def _end_of_archive(window: Window, offset: int) -> Refused | None:
    """Where `tarfile` stopped listing: the end of the file or its zero blocks are a tar's
    end; anything else is a header it could not read, which refuses the rest."""
    window.seek(offset)
    block = window.read(BLOCK)
    if not block.strip(b"\0"):
        return None
    message = f"an unreadable header at byte {offset:,}: the rest of the archive is not read"
    return Refused("", Reason.CORRUPT_ARCHIVE, message)
