"""What an archive is, told by its first bytes, and its members.

A manifest named `.tar`, `.zip`, `.tar.gz`, `.tgz` or anything its content shows to be one (a
WebDataset shard named `.tar`, a zip saved as `.bin`) is read as an archive (a gzip-compressed
one unpacked as it is listed: transforms/archive/gzipped.py); a folder that holds archives and
no subfolders is its archives (a folder of WebDataset shards).
"""

import os
import tarfile
from collections.abc import Iterator

from tfrecord_pipeline.transforms.archive.gzipped import streamed_tar_entries
from tfrecord_pipeline.transforms.archive.members import ARCHIVE_SUFFIXES, Entry, Refused
from tfrecord_pipeline.transforms.archive.tars import Keep, tar_entries
from tfrecord_pipeline.transforms.archive.unpack import Unpacked
from tfrecord_pipeline.transforms.archive.zips import zip_entries
from tfrecord_pipeline.transforms.errors import Reason
from tfrecord_pipeline.transforms.storage import fileio, gcs

# An object is listed from reads this large: a tar's headers lie between its members' bytes,
# so listing one streams it, a read per 8 MiB rather than per member.
ARCHIVE_READ_BYTES = 8 << 20
HEAD_BYTES = tarfile.BLOCKSIZE
COMPRESSED = "a compressed tar (.tar.gz) is read only as a manifest: unpack it (gunzip)"


def archive_kind(head: bytes) -> str | None:
    """ "zip", "tar", "gzip", or None, from a file's first 512 bytes."""
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[257:262] == b"ustar" or _v7_header(head):
        return "tar"
    return None


def _v7_header(head: bytes) -> bool:
    """A pre-POSIX tar header: no magic, but a checksum that matches."""
    if len(head) < HEAD_BYTES or not head.strip(b"\0"):
        return False
    try:
        return tarfile.nti(head[148:156]) in tarfile.calc_chksums(head)
    except tarfile.HeaderError:
        return False


def is_archive_name(path: str) -> bool:
    return path.lower().endswith((*ARCHIVE_SUFFIXES, ".tgz", ".tar.gz"))


def read_entries(
    path: str,
    unpacked: Unpacked | None = None,
    keep: Keep | None = None,
    spool: bool = False,
    size: int | None = None,
) -> Iterator[Entry | Refused]:
    """Every member of the archive at `path`; a compressed tar's unpacked into `unpacked`
    (without one, as when a manifest names one of its members, it is refused), and with
    `spool` a tar's too, so that its bytes are read from the object store once; a tar's
    members `keep` asks for with their bytes (tars.py `tar_entries`). `size`: the archive's, as
    the launcher found it (an object's then costs no stat)."""
    with fileio.open_bytes(path, ARCHIVE_READ_BYTES, ARCHIVE_READ_BYTES * 2, size) as stream:
        size = stream.seek(0, 2)
        stream.seek(0)
        kind = archive_kind(stream.read(HEAD_BYTES))
        if kind is None and path.lower().endswith(".zip"):
            kind = "zip"  # data before its first member (a self-extracting zip)
        if kind == "zip":
            yield from zip_entries(stream, size, path)
        elif kind == "tar" and not (spool and unpacked is not None):
            yield from tar_entries(stream, size, path, keep=keep)
        elif kind in ("tar", "gzip") and unpacked is not None:
            stream.seek(0)
            yield from streamed_tar_entries(stream, unpacked, compressed=kind == "gzip")
        else:
            message = COMPRESSED if kind == "gzip" else "not a tar or zip archive"
            yield Refused("", Reason.CORRUPT_ARCHIVE, message)


def archives_in(folder: str) -> list[str]:
    """The archives a folder holds when it holds archives and no subfolder (a folder of
    WebDataset shards); else none: it is a class-folder tree."""
    if fileio.is_remote(folder):
        stats: dict = {}
        listed = list(gcs.list_folder(fileio.join(folder, ""), stats))
        names = [name for name, is_folder in listed if not is_folder]
        folders = any(is_folder for _, is_folder in listed)
        bucket = gcs.split(folder)[0]
        for name, stat in stats.items():
            if is_archive_name(name):
                gcs.remember_stat(f"gs://{bucket}/{name}", stat)
    else:
        try:
            listed = fileio.names_in(folder)
        except OSError:
            return []  # a folder that cannot be listed: the tree's check says why
        names = [name for name in listed if os.path.isfile(fileio.join(folder, name))]
        folders = any(os.path.isdir(fileio.join(folder, name)) for name in listed)
    archives = [fileio.join(folder, name) for name in names if is_archive_name(name)]
    return [] if folders else sorted(archives)


def holds_an_archive(path: str) -> bool:
    """Whether a file of no manifest's name begins as a tar or zip archive does."""
    try:
        with fileio.open_bytes(path, HEAD_BYTES) as stream:
            return archive_kind(stream.read(HEAD_BYTES)) is not None
    except fileio.READ_ERRORS:
        return False  # said to be missing by the caller
