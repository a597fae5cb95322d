"""The identities of many objects from their folder's listing: what a refresh fingerprints
`gs://` images by, a thousand a request rather than one.

A stat of an object is a request (its metadata), so a refresh that stats every row of a
dataset sends as many requests as a full conversion's reads, and on Dataflow, where both wait
on Cloud Storage, takes about as long. A listing answers with a page of up to a thousand
objects, each with the size and CRC-32C that make its identity (gcs.identity), the same as its
metadata gives. Cloud Storage bills a listing request as 12.5 metadata requests, so a folder is
listed only where it holds LIST_PAGE_ROWS of the objects wanted, and for at most a page each
LIST_PAGE_ROWS of them, from the first of their names: what the listing did not find is left
to stats. The requests then cost a thousandth of the stats where a folder's objects are all
wanted, and at worst (pages that find none of them) about twice.
"""

import functools
import math
from collections.abc import Iterable
from typing import NamedTuple

from tfrecord_pipeline.transforms.storage import gcs, jsonapi
from tfrecord_pipeline.transforms.storage.retry import StoreUnavailableError, retried

LIST_PAGE_ROWS = 13  # wanted objects a listing page must be worth: it costs 12.5 stats


def listed_identities(uris: Iterable[str], map_=map) -> dict[str, str]:
    """{uri: identity} of the `gs://` objects among `uris` that their folders' listings found,
    each folder that holds enough of them listed once (through `map_`, e.g. a thread pool's),
    from the first of their names to the last; the others are for stats. A folder whose listing
    keeps failing, or is refused, is left to stats as well, which have their own policy for a
    store that fails (transforms/image/files.py)."""
    wanted: dict[str, list[str]] = {}
    for uri in uris:
        if gcs.is_gcs(uri):
            wanted.setdefault(uri.rpartition("/")[0], []).append(gcs.split(uri)[1])
    spans = [
        _Span(folder, frozenset(names), math.ceil(len(names) / LIST_PAGE_ROWS))
        for folder, names in wanted.items()
        if len(names) >= LIST_PAGE_ROWS
    ]
    found: dict[str, str] = {}
    for identities in map_(_listed_or_none, spans):
        found.update(identities or {})
    return found


class _Span(NamedTuple):
    folder: str
    names: frozenset[str]  # the names of the objects wanted in it
    most_pages: int


def _listed_or_none(span: _Span) -> dict[str, str] | None:
    """None when the listing cannot be had: it keeps failing, or it is refused (an account may
    read objects without the right to list them)."""
    try:
        return span_identities(span)
    except (StoreUnavailableError, OSError):  # OSError: refused (answers.raise_for_status)
        return None


def span_identities(span: _Span) -> dict[str, str]:
    """{uri: identity} of the wanted objects of a `gs://` folder that its listing finds, from
    the first name wanted on, page after page (each one request, retried as any request) until
    one reaches the last name wanted or `span.most_pages` have been read."""
    bucket, prefix = gcs.folder_prefix(span.folder)
    first, last = min(span.names), max(span.names)
    found, token = {}, None
    for _ in range(span.most_pages):
        page = functools.partial(_page, bucket, prefix, first, token)
        objects, token = retried(page, f"the listing of {span.folder}")
        found.update(
            (f"gs://{bucket}/{name}", identity) for name, identity in objects if name in span.names
        )
        if not token or (objects and objects[-1][0] >= last):
            break
    return found


def _page(
    bucket: str, prefix: str, first: str, token: str | None
) -> tuple[list[tuple[str, str]], str | None]:
    """One page of a folder's listing from the name `first` on: (name, identity) of its objects,
    the next page's token."""
    listed, token = jsonapi.listed_objects(bucket, prefix, first, token)
    return [(found.name, gcs.identity(found.size, found.crc32c)) for found in listed], token
