"""An answer from the store as http.client reads it, but for two things, each a cost paid
for every image a worker reads (on Dataflow, CPU is the bill):
- its headers are read here: the email package's parser, which http.client reads them with,
  costs 30 us of CPU an answer (65 us for the 17 headers Cloud Storage sends with an object),
  half the Python of an image's request. Of the headers HTTPResponse asks only the first value
  of a name and all of them (`_Headers`);
- it is read through a buffer of READ_BUFFER_BYTES, not 8 KB: the first read takes as much of
  the answer as has arrived, its headers and a typical image's whole body, where 8 KB at a
  time took 2-3 receives an image. Every receive on a thread among many hands the GIL to
  another thread and back (benchmarks/gcs_read_cost.py: CPU an image).
HTTPResponse's own reading is kept: the status line, the body, chunked or not.
"""

import http.client
import io

READ_BUFFER_BYTES = 1 << 16  # at least a typical image's answer (~30-60 KB)


class _Headers:
    """An answer's header values by lower-case name, each name's in the order sent."""

    __slots__ = ("_values",)

    def __init__(self, values: dict[str, list[str]]):
        self._values = values

    def get(self, name: str, default=None):
        values = self._values.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str, default=None):
        return self._values.get(name.lower(), default)


class Answer(http.client.HTTPResponse):
    """A connection's answer (its `response_class`), with what HTTPResponse.begin makes of its
    status and headers: how long its body is, chunked or not, whether the connection closes
    after it."""

    def __init__(self, sock, *args, **kwargs):
        super().__init__(sock, *args, **kwargs)
        self.fp = io.BufferedReader(self.fp.detach(), READ_BUFFER_BYTES)

    def begin(self) -> None:
        if self.headers is not None:
            return
        version, status, reason = self._read_status()
        while status == http.client.CONTINUE:  # an interim answer: its headers skipped
            _header_values(self.fp)
            version, status, reason = self._read_status()
        old = version in ("HTTP/1.0", "HTTP/0.9")
        if not old and not version.startswith("HTTP/1."):
            raise http.client.UnknownProtocol(version)
        self.code = self.status = status
        self.reason, self.version = reason.strip(), 10 if old else 11
        self.headers = self.msg = _Headers(_header_values(self.fp))
        self.chunked = (self.headers.get("transfer-encoding") or "").lower() == "chunked"
        self.chunk_left = None
        self.will_close = self._check_close()
        length = self.headers.get("content-length", "")
        digits = not self.chunked and length.isascii() and length.isdigit()
        self.length = int(length) if digits else None
        no_body = status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED) or status < 200
        if no_body or self._method == "HEAD":
            self.length = 0
        if self.length is None and not self.chunked:
            self.will_close = True  # the body ends where the connection does


def _header_values(stream) -> dict[str, list[str]]:
    """The header lines up to the blank one, by lower-case name (a line folded onto the next,
    obsolete but allowed, joined to it); at most http.client's number of them, each at most
    its line length: a server sending more is failing."""
    values: dict[str, list[str]] = {}
    last: list[str] = []
    for _ in range(http.client._MAXHEADERS + 1):
        line = stream.readline(http.client._MAXLINE + 1)
        if len(line) > http.client._MAXLINE:
            raise http.client.LineTooLong("header line")
        if line in (b"\r\n", b"\n", b""):
            return values
        text = line.decode("iso-8859-1")
        if text[0] in " \t" and last:
            last[-1] = f"{last[-1]} {text.strip()}"
            continue
        name, _, value = text.partition(":")
        last = values.setdefault(name.strip().lower(), [])
        last.append(value.strip())
    raise http.client.HTTPException(f"got more than {http.client._MAXHEADERS} headers")
