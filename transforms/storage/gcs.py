"""Cloud Storage requests, each one through the one retry layer (transforms/storage/retry.py):
every `gs://` request the project sends goes through here (or through remote.py's copies and
deletions, jsonapi.py's requests too), one client (jsonapi.py, uploads.py over answers.py and
connection.py) and one error vocabulary (answers.py).

Beam's gs:// reader asks for an object's metadata before its media, and fingerprinting asked once
more: three requests, where the media response alone tells what is needed (the body, and its
CRC-32C in X-Goog-Hash). So an image is read here with one GET of its media, nothing before it,
sent on a connection of its own (transforms/storage/jsonapi.py: a fifth of the Python client's CPU).
Metadata, ranged reads of manifests, listing pages and a small object's generation-pinned read
(`read_generation`) are GETs there too; uploads, whole or resumable, are uploads.py's, made
conditional on a generation when asked (`write`). A `gs://` folder is listed
a page at a time; a manifest or an archive is read as one stream where it is read on
(transforms/storage/range_reader.py)."""

import contextlib
import functools
from collections.abc import Iterator
from typing import NamedTuple

from tfrecord_pipeline.transforms.storage import jsonapi, uploads
from tfrecord_pipeline.transforms.storage.retry import (
    CorruptTransferError,
    StoreUnavailableError,
    retried,
)


def is_gcs(path: str) -> bool:
    """A Cloud Storage path, which this module's requests serve (other stores: Beam's)."""
    return path.startswith("gs://")


def split(path: str) -> tuple[str, str]:
    """("bucket", "object name") of a gs:// path."""
    bucket, _, name = path.removeprefix("gs://").partition("/")
    return bucket, name


class Read(NamedTuple):
    data: bytes
    identity: str  # see `identity`


def identity(size: int, crc32c: str) -> str:
    """What tells an object's versions apart: its size and CRC-32C (as Cloud Storage gives it,
    base64), which its metadata and every download of it both carry."""
    return f"{size}:{crc32c}"


def read(path: str, max_bytes: int | None) -> Read | None:
    """The object's bytes and identity in one request (a GET of its media, transforms/storage/
    jsonapi.py, its body checked against the CRC-32C its response announces; retried when it
    fails transiently); None when it holds more than `max_bytes`. A missing object raises
    FileNotFoundError, one the caller may not read PermissionError."""
    media = retried(lambda: jsonapi.media(path, max_bytes), path)
    return None if media is None else Read(media.data, identity(len(media.data), media.crc32c))


class Stat(NamedTuple):
    size: int
    identity: str


def stat(path: str) -> Stat:
    """Size and identity from the object's metadata (one request); FileNotFoundError if none."""
    found = retried(lambda: jsonapi.metadata(path), path)
    size = int(found["size"])
    return Stat(size, identity(size, found["crc32c"]))


def read_generation(path: str) -> tuple[bytes, int] | None:
    """A small object's bytes and their generation (None: no object): metadata, then that
    generation's media, never one generation's bytes under another's number (the emulator
    ignores the generation asked for: jsonapi.media)."""
    while True:
        try:
            generation = int(retried(lambda: jsonapi.metadata(path), path)["generation"])
        except FileNotFoundError:
            return None
        with contextlib.suppress(FileNotFoundError):  # rewritten between the two: read again
            media = retried(lambda: jsonapi.media(path, None, generation), path)  # noqa: B023
            return media.data, generation


def write(
    path: str, data: bytes, if_generation_match: int | None = None, content_type: str = ""
) -> int:
    """The object holding `data`, whole or not at all, from one upload sent again after a
    transient failure; its generation. With `if_generation_match`, only if the object's
    generation is that one (0: there is none), else PreconditionFailedError: then the caller
    decides whether its own upload, sent again after its answer was lost, is what it finds."""
    upload = functools.partial(uploads.upload, path, data, if_generation_match, content_type)
    return retried(upload, path).generation


def create(path: str) -> uploads.ResumableUpload:
    """A write handle on an object written as it is made (a shard, an errors file): a
    resumable upload, made when it is closed (uploads.ResumableUpload)."""
    return uploads.ResumableUpload(path)


def read_range(path: str, start: int, end: int) -> bytes:
    """Bytes `start` to `end` (exclusive) of an object from one ranged request, retried as any
    read here, an empty answer where the object has bytes too (a cut body, not its end)."""

    def ranged() -> bytes:
        data = jsonapi.media_range(path, start, end)
        if not data:
            raise CorruptTransferError(f"{path}: no bytes at {start:,}")
        return data

    return retried(ranged, path)


def folder_prefix(folder: str) -> tuple[str, str]:
    """A `gs://` folder's bucket, and the prefix its objects' names start with ("" at the top)."""
    bucket, prefix = split(folder)
    return bucket, prefix.rstrip("/") + "/" if prefix.strip("/") else ""


def list_folder(folder: str, stats: dict | None = None) -> Iterator[tuple[str, bool]]:
    """(name, whether a subfolder) of what is directly in a `gs://` folder: its objects as the
    listing streams them (in name order, a page at a time, each page one request), then its
    subfolders (prefixes); each object's `Stat` put in `stats` by name, when given."""
    bucket, prefix = folder_prefix(folder)
    token, subfolders = None, set()
    while True:
        page = functools.partial(jsonapi.list_page, bucket, prefix, "/", token, None)
        listed = retried(page, folder)
        names, token = listed.names, listed.next_token
        subfolders.update(listed.prefixes)
        if stats is not None:
            stats.update(zip(names, listed_stats(listed), strict=True))
        # The folder's own placeholder object (named `prefix`) is not in it.
        yield from ((name[len(prefix) :], False) for name in names if name != prefix)
        if not token:
            break
    for sub in sorted(subfolders):
        yield sub[len(prefix) :].rstrip("/"), True


def listed_stats(page: jsonapi.Page) -> list[Stat | None]:
    """A listing page's objects' sizes and identities, in its names' order (None: not said)."""
    return [
        Stat(size, identity(size, crc32c)) if size is not None and crc32c else None
        for size, crc32c in zip(page.sizes, page.crc32cs, strict=True)
    ]


# The sizes and identities of archives the launcher's listings saw (a folder of archives, a
# glob), by path: it takes an archive's from them rather than a request of its own. Only the
# archives' are kept (a listing of a tree's millions of images keeps none).
_LISTED_STATS: dict[str, Stat] = {}


def remember_stat(path: str, stat: Stat | None) -> None:
    if stat is not None:
        _LISTED_STATS[path] = stat


def listed_stat(path: str) -> Stat | None:
    """An archive's size and identity as a listing of this process saw it, if one did."""
    return _LISTED_STATS.get(path)


def holds_objects(folder: str) -> bool:
    """Whether any object's name starts with a `gs://` folder's prefix (one listed, not all)."""
    bucket, prefix = folder_prefix(folder)

    def first() -> bool:
        return any(jsonapi.list_page(bucket, prefix, "", None, 1)[:2])

    return retried(first, folder)


def store_answers(path: str) -> bool:
    """After requests for `path` kept failing: whether the store answers a request naming the
    object in another way (a listing of its name, retried as any request), that is whether the
    object fails rather than the service. Any answer counts, a refusal too. Another store's
    objects are not asked about: their failure is the service's."""
    if not is_gcs(path):
        return False
    bucket, name = split(path)

    def list_name() -> None:
        jsonapi.list_page(bucket, name, "", None, 1)

    try:
        retried(list_name, f"the listing of {path}")
    except StoreUnavailableError:
        return False
    except Exception:  # noqa: BLE001 - an answer, if a refusal: the service is up
        return True
    return True
