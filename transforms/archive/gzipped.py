"""A gzip-compressed tar (`.tar.gz`, `.tgz`), listed as one stream and unpacked as it goes.

A compressed tar has no byte range a member could be read from, so it is read once, in order
(tarfile's stream mode: one decompressor, a block at a time), and each image member is copied
into the listing's staged file (transforms/archive/unpack.py). Its members are judged as a
tar's are (transforms/archive/tars.py `refusal`). A gzip bomb is bounded: a member over
--max_file_mb is skipped unread (decompressed and dropped a buffer at a time) and becomes a
`file_too_large` row, so the staged file holds only the images that will be converted; a tar
inside the compressed tar is refused (unpack the outer one). A stream that cannot be
decompressed, or ends early, refuses the rest of the archive after the members already read.
"""

import tarfile
import zlib
from collections.abc import Iterator

from tfrecord_pipeline.transforms.archive.headers import QuickInfo
from tfrecord_pipeline.transforms.archive.members import Entry, Refused
from tfrecord_pipeline.transforms.archive.tars import (
    MAX_HEADER_BYTES,
    clean,
    refusal,
    shown_name,
)
from tfrecord_pipeline.transforms.archive.unpack import Unpacked
from tfrecord_pipeline.transforms.errors import Reason
from tfrecord_pipeline.transforms.storage import fileio, retry

# What a damaged stream raises: tarfile's errors, zlib's, gzip's (an OSError), a short read.
DAMAGED = (tarfile.TarError, EOFError, OSError, zlib.error)
NESTED = "a tar inside a tar read as a stream is not read: unpack the outer one"
# Headers tarfile reads whole into memory as it meets them: a name or pax record, a sparse map.
_WHOLE_HEADERS = {tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE}
_WHOLE_HEADERS |= {tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE}


class _BoundedInfo(QuickInfo):
    """A member header that refuses, before tarfile reads it, a name or pax header declaring
    over MAX_HEADER_BYTES (in a compressed tar, a gigabyte of zeros is a megabyte: a bomb in
    the header, where no member size limit looks) and an old GNU sparse member, whose map
    tarfile reads a block at a time for as long as it goes on. A stream cannot be read back,
    so the rest of the archive is refused (tars.py bounds a seekable tar's headers itself)."""

    def _proc_member(self, tarfile_):
        if self.type in _WHOLE_HEADERS and self.size > MAX_HEADER_BYTES:
            raise tarfile.HeaderError(f"a header declaring {self.size:,} bytes")
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise tarfile.HeaderError("a sparse member")
        return super()._proc_member(tarfile_)


def streamed_tar_entries(
    stream, unpacked: Unpacked, compressed: bool = True
) -> Iterator[Entry | Refused]:
    """Every member of the compressed tar (or, not `compressed`, the tar spooled from an
    object store: --archive_order keep) read from `stream`, in archive order, each image
    member's bytes appended to `unpacked`."""
    members = 0
    try:
        tar = tarfile.open(  # noqa: SIM115 - closing it would close nothing of ours
            fileobj=stream,
            mode="r|gz" if compressed else "r|",
            tarinfo=_BoundedInfo,
            encoding="utf-8",
            errors="surrogateescape",
        )
        while (info := tar.next()) is not None:
            tar.members.clear()  # tarfile keeps every member it lists; one is held at a time
            item = _member(tar, info, unpacked)
            if item is not None:
                members += 1
                yield item
    except DAMAGED as error:
        if isinstance(error, fileio.UNAVAILABLE) or retry.is_transient(error):
            raise  # the store's failure, not the archive's: the listing is retried
        said = " ".join(str(error).split()) or type(error).__name__
        kind = "compressed tar" if compressed else "tar"
        message = f"not a readable {kind} after {members:,} members ({said})"
        yield Refused("", Reason.CORRUPT_ARCHIVE, message)


def _member(tar: tarfile.TarFile, info: tarfile.TarInfo, unpacked: Unpacked):
    """An entry for one member (its bytes copied now: the stream moves on), its refusal, or
    None for a folder."""
    name = info.name
    refused = refusal(info)
    if refused:
        return Refused(shown_name(name), *refused)
    if info.isdir():
        return None
    if name.lower().endswith(".tar"):
        return Refused(name, Reason.UNSUPPORTED_MEMBER, NESTED)
    # Known again, as a tar member is, by its size and modification time (its header's).
    identity = f"{info.size}:{info.mtime}"
    return Entry(clean(name), name, unpacked.copy(tar.extractfile(info), info.size, identity))
