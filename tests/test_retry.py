"""transforms/storage/retry.py as its callers use it: every request to Cloud Storage goes
through `retried`, one request at a time (a listing's pages each on their own), against a
loopback server answering the JSON API's listing pages and failing the ones a test names. The
loop itself, the budget and what counts as transient: tests/test_read_faults.py."""

import json
import urllib.parse

import pytest
from scripted_server import response

from tfrecord_pipeline.transforms.storage import gcs, retry


@pytest.fixture
def serve(scripted_store, monkeypatch):
    """Starts a store answering listing pages keyed by page token (None: the first), each a
    (names, prefixes, next token); each token's request first answers 503 as many times as
    `failures` says. The server's `.asked` holds the page token of every request, in order."""
    monkeypatch.setattr(retry, "FIRST_DELAY_S", 0)

    def start(pages: dict, failures: dict):
        asked = []

        def answer(target: str, headers: dict, out) -> bool:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
            token = query.get("pageToken", [None])[0]
            asked.append(token)
            if failures.get(token):
                failures[token] -= 1
                out.write(response(b'{"error": {"code": 503}}', "503 Service Unavailable"))
                return True
            names, prefixes, following = pages[token]
            page = {"items": [{"name": name} for name in names], "prefixes": list(prefixes)}
            page.update({"nextPageToken": following} if following else {})
            out.write(response(json.dumps(page).encode(), Content_Type="application/json"))
            return True

        server = scripted_store(answer)
        server.asked = asked
        return server

    return start


def test_a_listing_is_streamed_page_by_page_and_a_failed_page_alone_is_asked_again(serve):
    server = serve(
        {
            None: (["f/", "f/a.jpg"], ("f/x/",), "t1"),  # "f/": the folder's own placeholder
            "t1": (["f/b.jpg"], ("f/x/", "f/c/"), None),
        },
        failures={"t1": 2},
    )
    listing = gcs.list_folder("gs://bucket/f")
    assert next(listing) == ("a.jpg", False) and server.asked == [None]
    assert list(listing) == [("b.jpg", False), ("c", True), ("x", True)]
    assert server.asked == [None, "t1", "t1", "t1"]


def test_a_listing_failing_through_every_attempt_is_the_store_unavailable(serve):
    server = serve({None: ([], (), None)}, failures={None: retry.ATTEMPTS})
    with pytest.raises(retry.StoreUnavailableError, match="gs://bucket/f"):
        list(gcs.list_folder("gs://bucket/f"))
    assert len(server.asked) == retry.ATTEMPTS


def test_whether_a_folder_holds_objects_is_one_request_retried_in_place(serve):
    server = serve({None: (["f/deep/a.jpg"], (), None)}, failures={None: 1})
    assert gcs.holds_objects("gs://bucket/f/")
    assert server.asked == [None, None]
