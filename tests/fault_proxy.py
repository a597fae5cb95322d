"""A loopback HTTP proxy in front of the GCS emulator that fails requests the way networks and
Cloud Storage do: a 503, a connection dropped before the answer, a body cut off midway.

Clients reach it as the emulator (STORAGE_EMULATOR_HOST names it). Every request is replayed
against the emulator on 127.0.0.1, unless it reads an object under `prefix` and its fault plan
says otherwise. A conditional upload is answered as Cloud Storage answers it (412 unless the
object's generation is the one asked for), which the emulator does not do. The plan is a
function of the seed, the request and how many times the same request came before, never of
timing or thread order: two runs meet the same faults, and no request fails more than
`MAX_IN_A_ROW` times in a row, except those of an object named in `always`, which fail every
time (with `listings_too`, listings of its name as well: the store then answers nothing about
it). An object can also be named in `always` with DAMAGE: its media then always arrives whole,
one byte changed, under the emulator's X-Goog-Hash.

Conditional uploads and deletions (`ifGenerationMatch`) are checked and made as one step, under
one lock, so two clients racing for the same generation meet Cloud Storage's answer: one
succeeds, the other gets 412.
"""

import hashlib
import http.client
import json
import re
import socketserver
import threading
import urllib.parse
from collections import Counter
from collections.abc import Callable

from loopback import LoopbackServer

FAULTS = ("503", "drop", "truncate")
DAMAGE = "damage"  # for `always` only: a media body with one byte changed, its length kept
LOST = "lost"  # for `session_puts` only: the request takes effect, its answer never comes
_UPLOADED_NAME = re.compile(rb'"name": ?"([^"]+)"')  # in an upload's metadata part
_SERVER_SIDE = re.compile(r"/o/[^?]+/(compose|copyTo/)")  # POSTs the store makes an object by
MAX_IN_A_ROW = 2
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "host"}


def object_name(target: str) -> str | None:
    """The object a JSON API request names (its metadata or its media), or None (a listing,
    a bucket, an upload)."""
    path = urllib.parse.urlsplit(target).path
    if "/b/" not in path or "/o/" not in path:
        return None
    return urllib.parse.unquote(path.split("/o/", 1)[1]) or None


def listed_prefix(target: str) -> str | None:
    """The prefix a listing of a bucket's objects asks for, or None."""
    split = urllib.parse.urlsplit(target)
    if not split.path.endswith("/o"):
        return None
    return urllib.parse.parse_qs(split.query).get("prefix", [""])[0]


def chunk_matches_range(content_range: str, body: bytes | None) -> bool:
    """Whether a session's chunk is as long as its Content-Range says (`bytes a-b/total`), as
    Cloud Storage requires (the emulator takes any length)."""
    span = re.fullmatch(r"bytes (\d+)-(\d+)/.*", content_range)
    return span is None or int(span[2]) - int(span[1]) + 1 == len(body or b"")


def planned_fault(seed: int, rate: float, request: str, repeat: int) -> str | None:
    """The fault for the `repeat`-th (from 0) sending of `request`, or None: each sending fails
    with probability `rate`, never more than MAX_IN_A_ROW times in a row."""
    if repeat >= MAX_IN_A_ROW:
        return None
    digest = hashlib.blake2b(f"{seed}|{request}|{repeat}".encode(), digest_size=8).digest()
    if int.from_bytes(digest[:4], "big") >= rate * 2**32:
        return None
    return FAULTS[digest[4] % len(FAULTS)]


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        while self._one_request():
            pass

    def _one_request(self) -> bool:
        """Reads a request and answers it (or fails it); False when the connection is over."""
        line = self.rfile.readline().decode("latin-1").strip()
        if not line:
            return False
        method, target, _ = line.split(" ", 2)
        headers = {}
        while (header := self.rfile.readline().decode("latin-1").strip()) != "":
            name, _, value = header.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = self._body(headers)
        fault = self.server.fault_for(method, target, body)
        if fault == "drop":
            return False  # closed without a word, as a reset or a dead load balancer leaves it
        if fault == "503":
            return self._send_error(503, "Service Unavailable", "injected", headers)
        if not chunk_matches_range(headers.get("content-range", ""), body):
            return self._send_error(400, "Bad Request", "chunk size mismatch", headers)
        answered = self.server.answer(method, target, headers, body)
        if answered is None:
            return self._send_error(412, "Precondition Failed", "conditionNotMet", headers)
        status, reason, response_headers, data = answered
        if fault == LOST:
            return False
        if fault == DAMAGE:
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        if fault == "truncate" and data:
            # The length the whole body has, then half of it, then the end of the connection.
            self._send(status, reason, response_headers, data, cut=len(data) // 2)
            return False
        self._send(status, reason, response_headers, data)
        return headers.get("connection") != "close"

    def _body(self, headers: dict) -> bytes | None:
        if "content-length" in headers:
            return self.rfile.read(int(headers["content-length"]))
        if headers.get("transfer-encoding") == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return None

    def _send_error(self, status: int, reason: str, message: str, request_headers: dict) -> bool:
        """Answer with a JSON API error; whether the connection goes on."""
        error = json.dumps({"error": {"code": status, "message": message}}).encode()
        self._send(status, reason, [("Content-Type", "application/json")], error)
        return request_headers.get("connection") != "close"

    def _send(self, status, reason, headers, data: bytes, cut: int | None = None) -> None:
        lines = [f"HTTP/1.1 {status} {reason}"]
        lines += [f"{name}: {value}" for name, value in headers]
        lines.append(f"Content-Length: {len(data)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head + (data if cut is None else data[:cut]))
        self.wfile.flush()


class FaultProxy(LoopbackServer):
    """Context manager: serves on 127.0.0.1 at `.port` while open. Reads of objects under
    `prefix` fail at `rate` (seeded); those of an object in `always` meet its fault (one of
    FAULTS, or DAMAGE) every time. With `listings_too`, listings of prefixes under `prefix`
    meet the same faults (their own prefix in `always`, else at `rate`). The first upload of
    an object named in `first_upload` meets its fault: "truncate" lets the upload take effect
    and cuts its answer, the lost acknowledgement a client can only send again. With
    `copies_too`, composes and copies of objects under `prefix` meet faults at `rate` too (one
    cut lets it take effect: made, its answer lost). The n-th (from 0) PUT to a resumable
    upload's session meets the fault `session_puts` names for n (LOST among them). `.requests`
    counts the (method, object name) of every request, `.listings` the listing requests by
    prefix, `.faults` the faults met by kind, `.failed` by object. With `writes_too`, whole
    uploads and deletions of objects under `prefix` meet faults at `rate` too: a 503 or a
    dropped connection before they take effect, or (for a cut) their answer lost after it."""

    def __init__(
        self,
        emulator_port: int,
        prefix: str,
        rate: float = 0.0,
        seed: int = 0,
        always: dict[str, str] | None = None,
        listings_too: bool = False,
        first_upload: dict[str, str] | None = None,
        copies_too: bool = False,
        session_puts: dict[int, str] | None = None,
        writes_too: bool = False,
    ):
        super().__init__(_Handler)
        self.emulator_port = emulator_port
        self.prefix, self.rate, self.seed = prefix, rate, seed
        self.always, self.listings_too = always or {}, listings_too
        self.copies_too, self.writes_too = copies_too, writes_too
        self.session_puts = session_puts or {}
        self.put_bytes = 0  # bytes the PUTs to upload sessions carried (to the emulator or not)
        self.first_upload = dict(first_upload or {})  # consumed as the uploads come
        self.requests: Counter = Counter()
        self.listings: Counter = Counter()  # listing requests, by the prefix they list
        self.faults: Counter = Counter()  # by kind
        self.failed: Counter = Counter()  # by object name (a listing's prefix)
        self._sent: Counter = Counter()  # sendings of each (method, target) so far
        # (method, object name): a step of another client's, run once when such a request
        # comes, before it is answered; what it returns is the fault the request meets.
        self.at: dict[tuple[str, str], Callable[[], str | None]] = {}
        self._lock = threading.Lock()
        self._conditional = threading.Lock()  # a precondition's check and its request, as one

    def fault_for(self, method: str, target: str, body: bytes | None = None) -> str | None:
        """The fault this request meets (counted), or None: it is replayed."""
        named = _UPLOADED_NAME.search(body or b"") if "/upload/" in target else None
        step = self.at.pop((method, named[1].decode() if named else object_name(target)), None)
        if step is not None and (fault := step()):
            return self._counted(object_name(target), fault)
        name = object_name(target)
        with self._lock:
            self.requests[method, name] += 1
            repeat = self._sent[method, target]
            self._sent[method, target] += 1
        if method == "POST" and "/upload/" in target:
            return self._upload_fault(body or b"") or self._write_fault(target, repeat, body)
        if method == "DELETE":
            return self._write_fault(target, repeat, body)
        if method == "PUT" and "upload_id=" in target:
            with self._lock:
                self.put_bytes += len(body or b"")
            return self._counted(name, self.session_puts.get(self.requests["PUT", name] - 1))
        copying = method == "POST" and self.copies_too and _SERVER_SIDE.search(target)
        if method != "GET" and not copying:
            return None
        if name is None:  # a listing, or a bucket's metadata
            listed = listed_prefix(target)
            if listed is not None:
                with self._lock:
                    self.listings[listed] += 1
            if not (self.listings_too and listed is not None and listed.startswith(self.prefix)):
                return None
            fault = self.always.get(listed) or planned_fault(
                self.seed, self.rate, f"{method} {target}", repeat
            )
            return self._counted(listed, fault)
        if not name.startswith(self.prefix):
            return None
        fault = self.always.get(name) or planned_fault(
            self.seed, self.rate, f"{method} {target}", repeat
        )
        if fault == DAMAGE and "alt=media" not in target:
            fault = None  # its metadata arrives as it is: only the media is damaged
        return self._counted(name, fault)

    def _upload_fault(self, body: bytes) -> str | None:
        """The fault of the first upload of an object named in `first_upload` (its name is in
        the upload's metadata part); its later uploads pass."""
        with self._lock:
            named = _UPLOADED_NAME.search(body)
            name = named.group(1).decode() if named else None
            if name not in self.first_upload:
                return None
            fault = self.first_upload.pop(name)
        return self._counted(name, fault)

    def _write_fault(self, target: str, repeat: int, body: bytes | None) -> str | None:
        """With `writes_too`, the fault of a whole upload or a deletion under `prefix`: a cut
        becomes LOST (the write takes effect, its answer never comes)."""
        named = _UPLOADED_NAME.search(body or b"") if "/upload/" in target else None
        name = named.group(1).decode() if named else object_name(target)
        if (
            not self.writes_too
            or "upload_id=" in target
            or not (name or "").startswith(self.prefix)
        ):
            return None
        fault = planned_fault(self.seed, self.rate, f"{target}|{name}", repeat)
        return self._counted(name, LOST if fault == "truncate" else fault)

    def _counted(self, name: str | None, fault: str | None) -> str | None:
        if fault:
            with self._lock:
                self.faults[fault] += 1
                self.failed[name] += 1
        return fault

    def answer(self, method: str, target: str, headers: dict, body: bytes | None):
        """The emulator's answer to a request, or None for a conditional one whose condition
        fails (412); a conditional request's check and its replay hold one lock."""
        wanted = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query).get("ifGenerationMatch")
        if not wanted:
            return self.forward(method, target, headers, body)
        with self._conditional:
            if self.generation(method, target, body) not in (None, int(wanted[0])):
                return None
            return self.forward(method, target, headers, body)

    def generation(self, method: str, target: str, body: bytes | None) -> int | None:
        """The generation of the object a conditional upload or deletion names (0: none), as
        Cloud Storage compares it with `ifGenerationMatch`; None for any other request."""
        split = urllib.parse.urlsplit(target)
        if method == "POST" and "/upload/" in target:
            named = _UPLOADED_NAME.search(body or b"")
            name = urllib.parse.quote(named.group(1).decode(), safe="") if named else None
        elif method == "DELETE":
            name = split.path.split("/o/", 1)[1] if "/o/" in split.path else None
        else:
            return None
        if not name:
            return None
        bucket = split.path.split("/b/", 1)[1].split("/", 1)[0]
        status, _, _, data = self.forward("GET", f"/storage/v1/b/{bucket}/o/{name}", {}, None)
        return int(json.loads(data)["generation"]) if status == 200 else 0

    def forward(self, method: str, target: str, headers: dict, body: bytes | None):
        """The emulator's answer: (status, reason, headers, body)."""
        forwarded = {k: v for k, v in headers.items() if k not in _HOP_BY_HOP}
        emulator = http.client.HTTPConnection("127.0.0.1", self.emulator_port, timeout=30)
        try:
            emulator.request(method, target, body=body, headers=forwarded)
            response = emulator.getresponse()
            data = response.read()
        finally:
            emulator.close()
        kept = [
            (k, v)
            for k, v in response.getheaders()
            if k.lower() not in _HOP_BY_HOP | {"content-length"}
        ]
        return response.status, response.reason, kept, data
