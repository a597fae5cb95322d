"""A dataset root's layout, and how a reader finds its published version.

    ROOT/LATEST               {"version": "v000003-9f2c4e1a", "sha256": <of its metadata file>}
    ROOT/versions/<version>/  one conversion's shards and metadata; `_COMMITTED` written last
    ROOT/_staging/<version>/  a run's shard files until its commit moves them into its version
    ROOT/_published/<serial>-<version>  an empty record of each publication, in publication
                              order (pipeline/dataset/history.py)
    ROOT/.lock                the local lock around the pointer's compare-and-write and the
                              clean-up after it; on Cloud Storage, ROOT/_lease (a lease object)
    ROOT/_staging/<version>.live  the run's claim on its folders while it lives
                              (pipeline/dataset/claims.py)

Version numbers are never reused: a run takes the number after the highest one a version folder,
a record or the pointer names, whatever LATEST names (a rollback publishes an older version).
The layout holds no symbolic links (pipeline/dataset/layout.py).

Readers resolve the pointer once and read that version alone, its marker and metadata checked
against what the pointer promises; how a run writes and publishes a version is
pipeline/dataset/publish.py's.
"""

import hashlib
import json
import os
import re
from collections.abc import Callable
from typing import NamedTuple

from tfrecord_pipeline.dataset.metadata import INFO_FILE
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.storage import fileio

POINTER = "LATEST"
VERSIONS = "versions"
STAGING = "_staging"
PUBLISHED = "_published"
LOCK = ".lock"
LEASE = "_lease"
MARKER = "_COMMITTED"
_VERSION = re.compile(r"^v(\d{6,})-[0-9a-f]{8}$")


class DatasetError(UserError, ValueError):
    """A path that holds no published dataset, or files that are not what its pointer or
    marker promise."""


class Pointer(NamedTuple):
    """What LATEST holds: the published version, and the SHA-256 of its metadata file."""

    version: str
    sha256: str

    def to_bytes(self) -> bytes:
        return (json.dumps(self._asdict(), sort_keys=True) + "\n").encode()

    @classmethod
    def parse(cls, data: bytes, where: str) -> "Pointer":
        try:
            fields = json.loads(data)
            pointer = cls(fields["version"], fields["sha256"])
        except (ValueError, TypeError, KeyError):
            raise DatasetError(f"{where} is not a version pointer") from None
        if not _VERSION.match(str(pointer.version)):
            raise DatasetError(f"{where} names no version of this tool ({pointer.version!r})")
        return pointer


def sequence(version: str) -> int:
    """A version's place in publication order; 0 for a name that is not a version's."""
    match = _VERSION.match(version)
    return int(match.group(1)) if match else 0


def is_complete(root: str, version: str) -> bool:
    """Whether the version folder `version` of `root` holds its `_COMMITTED` marker."""
    return fileio.exists(fileio.join(root, VERSIONS, version, MARKER))


def metadata_digest(info_bytes: bytes) -> str:
    return hashlib.sha256(info_bytes).hexdigest()


def marker_bytes(info_bytes: bytes) -> bytes:
    """The `_COMMITTED` marker of a version whose metadata file holds `info_bytes`."""
    return json.dumps({INFO_FILE: metadata_digest(info_bytes)}).encode()


class Published(NamedTuple):
    """A complete version, as a reader resolved it once: its folder and its metadata's text."""

    folder: str
    info_text: str


def read_or_none(path: str) -> bytes | None:
    """A file's bytes, or None when there is none (a file standing where its folder should
    is none either); DatasetError, one line, for one that is there and cannot be read (a
    folder, permission denied)."""
    try:
        return fileio.read_bytes(path)
    except (*fileio.MISSING, NotADirectoryError):
        return None
    except fileio.READ_ERRORS as error:
        strerror = getattr(error, "strerror", None)
        raise DatasetError(
            f"{path} cannot be read: {strerror}" if strerror else str(error)
        ) from None


def _refuse_links(*paths: str) -> None:
    """A reader follows no symbolic link inside a dataset root (`LATEST`, `versions/`, the
    version it names), as a run makes none there and refuses to write through one: a link
    would have it read another folder's files, outside the root, as this dataset's. (The
    root's own path may be a link: that is the user's name for the dataset.)"""
    for path in paths:
        if not fileio.is_remote(path) and os.path.islink(path):
            raise DatasetError(f"{path} is a symbolic link; readers follow none in a dataset")


def resolve(path: str, read: Callable[[str], bytes | None] = read_or_none) -> Published:
    """The published version of the dataset root `path`, or `path` itself when it is a version
    folder; its marker and metadata checked against what the pointer promises. `read` gives a
    file's bytes or None when there is none (TensorFlow's file system in `load`); anything
    else about the root is a DatasetError of one line. `path` may be a pathlib path."""
    path = os.fspath(path).rstrip("/")
    _refuse_links(f"{path}/{POINTER}")
    pointer_bytes = read(f"{path}/{POINTER}")
    if pointer_bytes is not None:
        pointer = Pointer.parse(pointer_bytes, f"{path}/{POINTER}")
        folder = f"{path}/{VERSIONS}/{pointer.version}"
        _refuse_links(f"{path}/{VERSIONS}", folder)
        return complete_version(folder, pointer, read)
    return complete_version(path, None, read)


def complete_version(folder: str, pointer: Pointer | None, read) -> Published:
    """The version in `folder`, its marker and metadata checked against each other and against
    `pointer`, the pointer that names it (None: a version folder given as itself)."""
    marker = read(f"{folder}/{MARKER}")
    if marker is None and pointer:
        raise DatasetError(f"{folder}, which {POINTER} names, is not complete")
    if marker is None:
        raise DatasetError(
            f"{folder} holds no published dataset: neither a dataset root ({POINTER}) nor a "
            f"complete version folder ({MARKER})"
        )
    promised = pointer.sha256 if pointer else None
    info = read(f"{folder}/{INFO_FILE}")
    digest = metadata_digest(info) if info is not None else None
    try:
        marked = json.loads(marker)[INFO_FILE]
    except (ValueError, TypeError, KeyError):
        marked = None
    if digest is None or digest != marked or promised not in (None, digest):
        raise DatasetError(f"{folder}/{INFO_FILE} is not the file its {MARKER} marker names")
    return Published(folder, info.decode("utf-8"))
