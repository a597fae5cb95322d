"""A loopback HTTP server whose every answer is raw bytes a test writes, as odd servers and
networks answer: it closes idle keep-alive connections, answers HTTP/1.0, cuts or stalls a
body, ignores a Range. It counts the connections it accepted and the requests each carried."""

import socket
import socketserver
import threading
import time
from collections.abc import Callable

from loopback import LoopbackServer

# answer(request line's target, request headers, socket's file) -> whether to keep the
# connection open for another request.
Answer = Callable[[str, dict, object], bool]


def response(body: bytes, status: str = "200 OK", **headers: str) -> bytes:
    """A whole HTTP/1.1 response: `headers` (underscores as dashes), a Content-Length unless
    one is given or the body is chunked."""
    fields = {name.replace("_", "-"): value for name, value in headers.items()}
    if "Transfer-Encoding" not in fields:
        fields.setdefault("Content-Length", str(len(body)))
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return head.encode("latin-1") + b"\r\n" + body


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        try:
            self._requests()
        finally:
            with self.server.lock:
                self.server.closed += 1

    def _requests(self):
        server = self.server
        with server.lock:
            server.connections += 1
            number = server.connections
            server.requests[number] = []
        self.connection.settimeout(server.idle_close_s)
        while True:
            try:
                line = self.rfile.readline().decode("latin-1").strip()
            except TimeoutError:  # idle too long: closed, as load balancers close them
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if not line:
                return
            self.connection.settimeout(None)
            headers = {}
            while (header := self.rfile.readline().decode("latin-1").strip()) != "":
                name, _, value = header.partition(":")
                headers[name.strip().lower()] = value.strip()
            target = line.split(" ")[1]
            with server.lock:
                server.requests[number].append((target, headers))
                server.ports[number] = self.client_address[1]
            keep = server.answer(target, headers, self.wfile)
            self.wfile.flush()
            if not keep:
                return
            self.connection.settimeout(server.idle_close_s)


class ScriptedServer(LoopbackServer):
    """Context manager serving on 127.0.0.1 at `.port`; `requests` maps each connection's
    number (from 1) to the (target, headers) of the requests it carried."""

    def __init__(self, answer: Answer, idle_close_s: float | None = None):
        super().__init__(_Handler)
        self.answer, self.idle_close_s = answer, idle_close_s
        self.lock = threading.Lock()
        self.connections = self.closed = 0
        self.requests: dict[int, list[tuple[str, dict]]] = {}
        self.ports: dict[int, int] = {}  # each connection's port at the client's end

    def wait_idle_closed(self) -> None:
        """Until the server has closed every connection (idle ones after `idle_close_s`), and
        a little longer for the closing to reach the client's end."""
        deadline = time.monotonic() + 30
        while self.closed < self.connections and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
