"""An image file as the conversion meets it: its bytes, or the reason code of why its row is an
error; and what it weighs in a shard-size estimate.

Its own module because three stages look at image files: the plan weighs them (`stored_size`),
`--dedup` hashes their bytes and the shard writer converts them (`read_image`). Reading them
one way, with one policy for a store that keeps failing, means a file is judged alike by all,
and neither the plan nor the shard writer depends on the other.
"""

from tfrecord_pipeline.transforms.archive.locate import is_member_uri, locate
from tfrecord_pipeline.transforms.archive.members import Member, read_member
from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.storage import disk, fileio, gcs, retry
from tfrecord_pipeline.transforms.storage.read_ahead import Opened


def image_identity(uri: str, member: Member | None = None) -> str:
    """What tells an image file's versions apart without reading it (fileio.identity; an
    archive member's: its archive's and its place in it, `member` when the listing gave it)."""
    member = member or (locate(uri) if is_member_uri(uri) else None)
    return member.identity if member else fileio.identity(uri)


def read_image(
    uri: str, max_bytes: int, member: Member | None = None, opened: Opened | None = None
) -> tuple[bytes, str]:
    """The image file's bytes and identity (fileio.identity, as the read began), or an archive
    member's (transforms/archive/members.py), or the file's `opened` ahead (read_ahead.py); a
    file that cannot be had is a RowError, never a dead worker.

    A read that fails transiently is retried (transforms/storage/retry.py), so what a shard holds
    never depends on such a failure. A read still failing after its retries is this object's error
    row if the store answers other requests about it; if the store fails those too, the
    service is down, not the object, and the shard's attempt fails (Beam retries it; the
    local runner stops with exit status 3 and publishes nothing).
    """
    try:
        if opened is not None:
            return opened.read(uri, max_bytes)
        if member is None and is_member_uri(uri):
            member = locate(uri)
        if member is not None:
            return read_member(member, uri, max_bytes), member.identity
        return fileio.read_identified(uri, max_bytes)
    except retry.StoreUnavailableError:
        if not gcs.store_answers(uri):
            raise
        # Not the last error's text: which transient failure came last is chance, and the
        # error rows are part of the version's bytes.
        raise RowError(
            Reason.UNAVAILABLE_FILE,
            f"{uri}: every read failed, {retry.ATTEMPTS} attempts, while the store answered for it",
        ) from None
    except fileio.MISSING:
        raise RowError(Reason.MISSING_FILE, f"no such file: {uri}") from None
    except disk.NotAFileError as error:
        raise RowError(Reason.NOT_A_FILE, str(error)) from None
    except disk.FileTooLargeError as error:
        raise RowError(Reason.FILE_TOO_LARGE, f"{error} (--max_file_mb)") from None
    except fileio.READ_ERRORS as error:
        raise RowError(Reason.UNREADABLE_FILE, f"cannot read {uri}: {error}") from None


def local_file(item) -> str | None:
    """The path of the loose local image file a shard writer's row names (read_ahead.py opens
    it ahead of its read); None for any other item: an error row, an archive member, an object."""
    uri, member = getattr(item, "image_uri", None), getattr(item, "member", None)
    if uri is None or member is not None or is_member_uri(uri) or fileio.is_remote(uri):
        return None
    return uri


def stored_size(uri: str, max_file_bytes: int) -> int:
    """What an image file weighs in a shard-size estimate: its size, or nothing when it is
    over the limit (an error row, never stored), so one huge or sparse file cannot multiply
    a split's shards. An object whose stat keeps failing weighs nothing too if the store
    answers for it otherwise (read_image makes its error row), else the plan's step fails."""
    try:
        size = fileio.size(uri)
    except retry.StoreUnavailableError:
        if not gcs.store_answers(uri):
            raise
        return 0
    return size if size <= max_file_bytes else 0
