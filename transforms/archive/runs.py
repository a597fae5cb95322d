"""Members read in runs: the members of one archive that a shard holds one after another
(`--archive_order keep`) read as one stream, one request for the run on an object store,
never one a member.

A run's members are read in the order the archive holds them, from a stream that reads on over
what lies between them (headers, members of other shards or splits) rather than asking again;
each member's bytes are then what `read_member` checks and inflates, so a member read in a run
is the member read alone, byte for byte.
"""

from collections.abc import Iterable, Iterator

from tfrecord_pipeline.transforms.archive.members import Member, check_size, read_member
from tfrecord_pipeline.transforms.errors import Reason, RowError
from tfrecord_pipeline.transforms.storage import fileio, remote, retry

# Bytes between two members of a run read on through, not asked for again: beyond it (a member
# over --max_file_mb, a long stretch of another split's) a new request costs less than the bytes.
READ_THROUGH = 8 << 20
UNREADABLE = Reason.UNREADABLE_FILE


def with_runs(items: Iterable, max_bytes: int) -> Iterator[tuple[object, bytes | RowError | None]]:
    """Each of a shard writer's items (rows and error rows, in record order) with its image's
    bytes when it is a member kept in its archive's order, read in runs (one stream a run),
    or the RowError of why it has none; None for any other: its image is read on a thread.
    A loose file's row passes straight through (most conversions hold no other kind)."""
    run: list = []
    for item in items:
        member = _kept_member(item)
        if run and not _continues(run[-1].member, member):
            yield from _run_with_bytes(run, max_bytes)
            run = []
        if member is None:
            yield item, None
        else:
            run.append(item)
    if run:
        yield from _run_with_bytes(run, max_bytes)


def _run_with_bytes(run: list, max_bytes: int) -> Iterator[tuple[object, bytes | RowError]]:
    """A run's rows, each with its member's bytes (or RowError), read as one stream."""
    members = [(row.member, row.image_uri) for row in run]
    return zip(run, run_bytes(members, max_bytes), strict=True)


def _kept_member(item) -> Member | None:
    member = getattr(item, "member", None)
    return member if member is not None and member.kept else None


def run_bytes(members: list[tuple[Member, str]], max_bytes: int) -> Iterator[bytes | RowError]:
    """Each member's bytes, or the RowError of why it has none, in order; `members` are one
    container's, by offset. A local archive's members are read as they come (one positioned
    read each: the disk reads ahead)."""
    container = members[0][0].container
    if not fileio.is_remote(container):
        yield from (_read_alone(member, uri, max_bytes) for member, uri in members)
        return
    start, stop = members[0][0].offset, max(member.end for member, _ in members)
    done = 0
    try:
        with remote.open_range(container, start, stop, READ_THROUGH) as stream:
            for member, uri in members:
                try:
                    check_size(member, uri, max_bytes)
                    stream.seek(member.offset)
                    yield read_member(member, uri, max_bytes, _read_exactly(stream, member))
                except RowError as error:
                    yield error
                done += 1
    except retry.StoreUnavailableError:
        raise  # the store is down, not the archive: the shard's attempt fails (read_image)
    except fileio.READ_ERRORS as error:  # the archive gone or refused: each member left says so
        reason = Reason.MISSING_FILE if isinstance(error, fileio.MISSING) else UNREADABLE
        for _, uri in members[done:]:
            yield RowError(reason, f"cannot read {uri}: {error}")


def _read_alone(member: Member, uri: str, max_bytes: int) -> bytes | RowError:
    try:
        return read_member(member, uri, max_bytes)
    except RowError as error:
        return error


def _read_exactly(stream, member: Member) -> bytes:
    """The member's stored bytes (a zip member's local header with them), as many as there are."""
    wanted = member.end - member.offset
    chunks, got = [], 0
    while got < wanted and (chunk := stream.read(wanted - got)):
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _continues(last: Member | None, member: Member | None) -> bool:
    return (
        last is not None
        and member is not None
        and member.container == last.container
        and member.offset >= last.end
    )
