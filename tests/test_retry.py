"""transforms/storage/retry.py as its callers use it: every request to Cloud Storage made
through our own client goes through `retried`, with the client's retries off, one request at a
time (a listing's pages each on their own). The loop itself, the budget and what counts as
transient: tests/test_read_faults.py."""

from types import SimpleNamespace

import pytest
from google.api_core import exceptions as api

from tfrecord_pipeline.transforms.storage import gcs, retry


class _Page(list):
    prefixes: tuple = ()


class _Listing:
    def __init__(self, page: _Page, token: str | None):
        self.pages, self.next_page_token = iter([page]), token

    def __iter__(self):
        return iter(next(self.pages))


class _Client:
    """list_blobs over fixed pages, keyed by page token; each token's request first fails as
    many times as `failures` says."""

    def __init__(self, pages: dict, failures: dict):
        self.pages, self.failures, self.requests = pages, failures, []

    def list_blobs(self, bucket, prefix, page_token=None, retry="the client's", **options):
        self.requests.append((page_token, retry))
        if self.failures.get(page_token):
            self.failures[page_token] -= 1
            raise api.ServiceUnavailable("backend")
        names, prefixes, token = self.pages[page_token]
        page = _Page(SimpleNamespace(name=name) for name in names)
        page.prefixes = prefixes
        return _Listing(page, token)


@pytest.fixture
def no_waits(monkeypatch):
    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0)


def test_a_listing_is_streamed_page_by_page_and_a_failed_page_alone_is_asked_again(
    monkeypatch, no_waits
):
    client = _Client(
        {
            None: (["f/", "f/a.jpg"], ("f/x/",), "t1"),  # "f/": the folder's own placeholder
            "t1": (["f/b.jpg"], ("f/x/", "f/c/"), None),
        },
        failures={"t1": 2},
    )
    monkeypatch.setattr(gcs, "client", lambda: client)
    listing = gcs.list_folder("gs://bucket/f")
    assert next(listing) == ("a.jpg", False) and client.requests == [(None, None)]
    assert list(listing) == [("b.jpg", False), ("c", True), ("x", True)]
    assert client.requests == [(None, None), ("t1", None), ("t1", None), ("t1", None)]


def test_a_listing_failing_through_every_attempt_is_the_store_unavailable(monkeypatch, no_waits):
    client = _Client({None: ([], (), None)}, failures={None: retry.ATTEMPTS})
    monkeypatch.setattr(gcs, "client", lambda: client)
    with pytest.raises(retry.StoreUnavailableError, match="gs://bucket/f"):
        list(gcs.list_folder("gs://bucket/f"))
    assert len(client.requests) == retry.ATTEMPTS


def test_whether_a_folder_holds_objects_is_one_request_retried_in_place(monkeypatch, no_waits):
    client = _Client({None: (["f/deep/a.jpg"], (), None)}, failures={None: 1})
    monkeypatch.setattr(gcs, "client", lambda: client)
    assert gcs.holds_objects("gs://bucket/f/")
    assert client.requests == [(None, None), (None, None)]
