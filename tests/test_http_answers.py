"""The store's answers as transforms/storage/http_answers.py reads them: the same status, body
length, framing, connection reuse and headers as http.client's own reader makes of every kind
of answer, its whole answer taken in one read once it has arrived, and a server sending too
much refused as http.client refuses it (a failure retry.is_transient retries)."""

import http.client
import socket

import pytest
from scripted_server import response

from tfrecord_pipeline.transforms.storage import retry
from tfrecord_pipeline.transforms.storage.http_answers import READ_BUFFER_BYTES, Answer

DATA = bytes(range(256)) * 160  # 40 KB, an image's size
NAMES = ("content-length", "x-goog-hash", "connection", "transfer-encoding", "absent")


def _read(reader: type, raw: bytes, method: str = "GET") -> http.client.HTTPResponse:
    """A `reader` (Answer or http.client's own) of `raw`, sent whole before it reads."""
    ours, theirs = socket.socketpair()
    with theirs:
        theirs.sendall(raw)
    answer = reader(ours, method=method)
    ours.close()  # the answer's file keeps the socket open until it is closed
    answer.begin()
    return answer


def _what_is_read(answer: http.client.HTTPResponse) -> tuple:
    framing = (answer.status, answer.reason, answer.version, answer.length, answer.chunked)
    headers = tuple(answer.getheader(name, "-") for name in NAMES)
    return (*framing, answer.will_close, headers, answer.read())


def _chunked(data: bytes) -> bytes:
    pieces = [data[i : i + 5000] for i in range(0, len(data), 5000)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


ANSWERS = {
    "hashed": response(DATA, X_Goog_Hash="crc32c=AAAAAA==,md5=AAAA"),
    "two-hashes": response(DATA, X_Goog_Hash="md5=AAAA").replace(
        b"\r\n\r\n", b"\r\nx-goog-hash: crc32c=AAAAAA==\r\n\r\n", 1
    ),
    "chunked": response(_chunked(DATA), Transfer_Encoding="Chunked"),
    "no-length": response(DATA, Content_Length=""),
    "bad-length": response(DATA, Content_Length="-5"),
    "close": response(DATA, Connection="Close"),
    "http-1.0": response(DATA).replace(b"HTTP/1.1", b"HTTP/1.0", 1),
    "http-1.0-keep-alive": response(DATA, Connection="keep-alive").replace(
        b"HTTP/1.1", b"HTTP/1.0", 1
    ),
    "no-content": response(b"", "204 No Content", Content_Length="10"),
    "continue-first": b"HTTP/1.1 100 Continue\r\nX: y\r\n\r\n" + response(DATA),
    "not-found": response(b'{"error": "no such object"}', "404 Not Found"),
    "bare-lf": response(DATA).replace(b"\r\n", b"\n", 3),
}


@pytest.mark.parametrize("raw", ANSWERS.values(), ids=ANSWERS.keys())
def test_an_answer_is_read_as_http_client_reads_it(raw):
    assert _what_is_read(_read(Answer, raw)) == _what_is_read(_read(http.client.HTTPResponse, raw))


def test_a_header_folded_over_lines_is_its_lines_joined_by_a_space():
    """Obsolete, but a recipient may meet it (RFC 9112, 5.2); http.client keeps the breaks."""
    raw = response(b"x", Folded="one").replace(b"one\r\n", b"one\r\n two\r\n\tthree\r\n")
    answer = _read(Answer, raw)
    assert (answer.getheader("folded"), answer.read()) == ("one two three", b"x")


def test_the_answer_to_a_head_request_has_no_body():
    raw = response(b"", Content_Length=str(len(DATA)))
    assert _read(Answer, raw, method="HEAD").length == 0


def test_an_image_answer_that_has_arrived_is_taken_whole_by_the_first_read():
    answer = _read(Answer, response(DATA) + b"more than the answer")
    assert len(DATA) < READ_BUFFER_BYTES
    assert answer.fp.peek().startswith(DATA)  # the body read with its headers, no receive left
    assert answer.read() == DATA


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * (http.client._MAXHEADERS + 1) + b"\r\n",
        b"HTTP/1.1 200 OK\r\nX: " + b"y" * http.client._MAXLINE + b"\r\n\r\n",
        b"HTTP/2.0 200 OK\r\n\r\n",
        b"",
    ],
    ids=["too-many-headers", "header-too-long", "unknown-protocol", "nothing"],
)
def test_an_answer_http_client_refuses_is_refused_as_a_transient_failure(raw):
    with pytest.raises(http.client.HTTPException) as refused:
        _read(Answer, raw)
    with pytest.raises(type(refused.value)):
        _read(http.client.HTTPResponse, raw)
    assert retry.is_transient(refused.value)
