"""A loopback HTTPS proxy that lets TensorFlow's own gs:// filesystem talk to the GCS emulator.

TensorFlow's GCS client has the Google endpoints compiled in and ignores STORAGE_EMULATOR_HOST,
but its libcurl honours HTTPS_PROXY and CURL_CA_BUNDLE. This proxy answers every CONNECT itself
with a certificate from a throwaway CA, reads the HTTP requests inside the tunnel and replays
them against the emulator on 127.0.0.1. Nothing is ever forwarded anywhere else, and curl never
resolves the real host names when it goes through a proxy.

A token request (`POST /token`, Google's OAuth endpoint) is answered by the proxy itself with the
access token `TOKEN`, so credentials of any kind can be refreshed here; the Authorization header
of every replayed request is kept in `.authorizations`. A test can make the token endpoint fail
(`.token_status`) or answer chosen requests 401, as a token expired on the way (`.refuse`), and
require the proxy credentials a company's proxy requires (`.proxy_authorization`).
"""

import datetime
import http.client
import socketserver
import ssl
from collections import Counter
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from loopback import LoopbackServer

TOKEN = "loopback-token"
HOSTS = ("www.googleapis.com", "storage.googleapis.com", "oauth2.googleapis.com")
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "host"}


def _certificate(subject: str, issuer_key, issuer_name, public_key, ca: bool, hosts=()):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer_name)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if hosts:
        names = [x509.DNSName(host) for host in hosts]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """(CA bundle, server certificate, server key) files for the Google host names."""
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tfrp test CA")])
    ca = _certificate("tfrp test CA", ca_key, ca_name, ca_key.public_key(), True)
    server = _certificate(HOSTS[0], ca_key, ca_name, key.public_key(), False, HOSTS)
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


class _Tunnel(socketserver.StreamRequestHandler):
    def handle(self):
        request_line = self.rfile.readline().decode("latin-1")
        headers = {}
        while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if not request_line.startswith("CONNECT "):
            self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        wanted = self.server.proxy_authorization
        if wanted and headers.get("proxy-authorization") != wanted:
            self.wfile.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n")
            self.wfile.write(b'Proxy-Authenticate: Basic realm="p"\r\nContent-Length: 0\r\n\r\n')
            return
        self.server.tunnels[request_line.split()[1].split(":")[0]] += 1
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.wfile.flush()
        tls = self.server.tls.wrap_socket(self.connection, server_side=True)
        stream = tls.makefile("rwb")
        while self._replay(stream):
            pass

    def _replay(self, stream) -> bool:
        """One request from the tunnel, answered by the emulator; False when the client is done."""
        line = stream.readline().decode("latin-1").strip()
        if not line:
            return False
        method, target, _ = line.split(" ", 2)
        headers = {}
        while (header := stream.readline().decode("latin-1").strip()) != "":
            name, _, value = header.partition(":")
            headers[name.strip()] = value.strip()
        length = int(headers.get("Content-Length", headers.get("content-length", 0)))
        body = stream.read(length) if length else None
        if method == "POST" and target.startswith("/token"):
            self.server.token_requests += 1
            status = self.server.token_status
            token = f'{{"access_token": "{TOKEN}", "expires_in": 3600, "token_type": "Bearer"}}'
            token = token if status == 200 else '{"error": "internal_failure"}'
            stream.write(f"HTTP/1.1 {status} -\r\nContent-Type: application/json\r\n".encode())
            stream.write(f"Content-Length: {len(token)}\r\n\r\n{token}".encode())
            stream.flush()
            return True
        self.server.authorizations.append(headers.get("Authorization"))
        if len(self.server.authorizations) - 1 in self.server.refuse:  # the token expired
            stream.write(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
            stream.flush()
            return True
        forwarded = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
        emulator = http.client.HTTPConnection("127.0.0.1", self.server.emulator_port, timeout=30)
        emulator.request(method, target, body=body, headers=forwarded)
        response = emulator.getresponse()
        data = response.read()
        stream.write(f"HTTP/1.1 {response.status} {response.reason}\r\n".encode("latin-1"))
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP | {"content-length"}:
                stream.write(f"{name}: {value}\r\n".encode("latin-1"))
        stream.write(f"Content-Length: {len(data)}\r\n\r\n".encode("latin-1") + data)
        stream.flush()
        emulator.close()
        return True


class TlsProxy(LoopbackServer):
    """Context manager: serves on 127.0.0.1 at `.port` while open."""

    def __init__(self, folder: Path, emulator_port: int):
        super().__init__(_Tunnel)
        self.ca_bundle, certificate, key = make_certificates(folder)
        self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.tls.load_cert_chain(certificate, key)
        self.emulator_port = emulator_port
        self.authorizations: list[str | None] = []
        self.refuse: set[int] = set()  # the requests (numbered from 0) answered 401
        self.token_status = 200  # what the token endpoint answers
        self.token_requests = 0
        self.tunnels: Counter = Counter()  # CONNECTs answered (TLS connections made), by host
        self.proxy_authorization: str | None = None  # a tunnel asked without it: a 407
