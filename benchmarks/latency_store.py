"""A latency-injecting stand-in for Cloud Storage on loopback, for benchmarks only. It is not
Cloud Storage and not an emulator: it copies objects from a gcp-storage-emulator into memory at
start and answers reads of them after a fixed delay.

Why: the emulator answers a few hundred requests a second and answers them at once, while Cloud
Storage answers thousands a second, each after tens of milliseconds (40 ms to first byte, as the
README models it). A shard writer's reads in flight only show against the latter.

At start it lists the objects under PREFIX in BUCKET on the emulator and keeps each one's media
response (body, X-Goog-Hash with crc32c and md5, Content-Type) and its metadata. Then, for those
objects, a GET of the media (`alt=media`, no Range) or of the metadata is answered from memory
after the delay: an asyncio sleep, which holds no thread, so one process on one core serves
thousands of requests a second. Every other request (listings, uploads, ranged reads, conditional
reads, objects not copied) is forwarded to the emulator unchanged, without the delay.
`POST /_delay?ms=N` sets the delay while it runs; `GET /_counts` tells how many requests it
answered from memory (media, metadata) and how many it forwarded, by method, and the bytes of
the forwarded answers' bodies.

    python benchmarks/latency_store.py EMULATOR_URL BUCKET PREFIX [DELAY_MS]

prints `serving PORT` once the objects are in memory; point a converter at it with
STORAGE_EMULATOR_HOST=http://127.0.0.1:PORT.
"""

import asyncio
import contextlib
import json
import subprocess
import sys
import urllib.parse
import urllib.request
from collections import Counter
from typing import NamedTuple

from aiohttp import ClientSession, TCPConnector, web

DELAY_MS = 40.0  # Cloud Storage's time to first byte, as the README's Dataflow model takes it
# The query keys of a plain read; any other (a generation, a precondition) goes to the emulator.
PLAIN_READ = {"alt", "prettyPrint", "userProject"}
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}
_KEPT_HEADERS = ("X-Goog-Hash", "Content-Type", "X-Goog-Generation", "X-Goog-Metageneration")


class StoredObject(NamedTuple):
    media: bytes
    media_headers: dict[str, str]  # as the emulator answered its media request
    metadata: bytes  # the object's JSON resource


def object_of(path: str) -> tuple[str, str] | None:
    """(bucket, object name) of a JSON API object request (`[/download]/storage/v1/b/B/o/N`),
    or None for any other path (a listing, a bucket, an upload)."""
    rest = path.removeprefix("/download").removeprefix("/storage/v1/b/")
    bucket, marker, name = rest.partition("/o/")
    if rest == path or not marker or not name:
        return None
    return bucket, urllib.parse.unquote(name)


def served_from_memory(method: str, path: str, query: dict, headers) -> tuple[str, str] | None:
    """The (bucket, name) a request reads whole, as kept in memory, or None: forward it."""
    if method != "GET" or "Range" in headers or not set(query) <= PLAIN_READ:
        return None
    return object_of(path)


async def load(session: ClientSession, emulator: str, bucket: str, prefix: str) -> dict:
    """Every object under `prefix`, by (bucket, name), read from the emulator 16 at a time."""
    resources, token = [], None
    while True:
        query = {"prefix": prefix, **({"pageToken": token} if token else {})}
        async with session.get(f"{emulator}/storage/v1/b/{bucket}/o", params=query) as answer:
            page = await answer.json(content_type=None)
        resources += page.get("items", [])
        token = page.get("nextPageToken")
        if not token:
            break
    limit = asyncio.Semaphore(16)

    async def one(resource: dict) -> tuple[tuple[str, str], StoredObject]:
        name = urllib.parse.quote(resource["name"], safe="")
        url = f"{emulator}/download/storage/v1/b/{bucket}/o/{name}?alt=media"
        async with limit, session.get(url) as answer:
            body = await answer.read()
            kept = {key: answer.headers[key] for key in _KEPT_HEADERS if key in answer.headers}
        metadata = json.dumps(resource).encode()
        return (bucket, resource["name"]), StoredObject(body, kept, metadata)

    return dict(await asyncio.gather(*map(one, resources)))


class LatencyStore:
    """The aiohttp application: objects from memory after `delay_ms`, the rest forwarded."""

    def __init__(self, emulator: str, objects: dict, session: ClientSession, delay_ms: float):
        self.emulator, self.objects, self.session = emulator, objects, session
        self.delay_s = delay_ms / 1000
        self.counts: Counter = Counter()  # by "media", "metadata" or "forwarded <method>"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "POST" and request.path == "/_delay":
            self.delay_s = float(request.query["ms"]) / 1000
            return web.Response(text=f"delay {self.delay_s * 1000:g} ms\n")
        if request.method == "GET" and request.path == "/_counts":
            return web.json_response(dict(self.counts))
        key = served_from_memory(request.method, request.path, request.query, request.headers)
        stored = self.objects.get(key) if key else None
        if stored is None:
            self.counts[f"forwarded {request.method}"] += 1
            answer = await self.forward(request)
            self.counts[f"forwarded {request.method} bytes"] += len(answer.body or b"")
            return answer
        await asyncio.sleep(self.delay_s)
        if request.query.get("alt") == "media":
            self.counts["media"] += 1
            return web.Response(body=stored.media, headers=stored.media_headers)
        self.counts["metadata"] += 1
        return web.Response(body=stored.metadata, content_type="application/json")

    async def forward(self, request: web.Request) -> web.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        body = await request.read()
        url = f"{self.emulator}{request.path_qs}"
        async with self.session.request(
            request.method, url, headers=headers, data=body, allow_redirects=False
        ) as answer:
            data = await answer.read()
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP}
        return web.Response(status=answer.status, body=data, headers=kept)


async def serve(emulator: str, bucket: str, prefix: str, delay_ms: float, port: int = 0) -> None:
    """Load the objects, serve on 127.0.0.1:`port` (0: a free one), print `serving PORT`, and
    serve until killed."""
    async with ClientSession(connector=TCPConnector(limit=64)) as session:
        objects = await load(session, emulator, bucket, prefix)
        store = LatencyStore(emulator, objects, session, delay_ms)
        server = web.Server(store.handle)
        runner = web.ServerRunner(server, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
        await site.start()
        bound = runner.addresses[0][1]
        print(f"serving {bound} ({len(objects)} objects)", flush=True)
        await asyncio.Event().wait()


@contextlib.contextmanager
def running(emulator: str, prefix: str, delay_ms: float = DELAY_MS):
    """This store, in a process of its own, in front of the emulator at `emulator`, serving the
    objects under `prefix` of BUCKET from memory once they are loaded: its address."""
    from emulator import BUCKET

    command = [sys.executable, __file__, emulator, BUCKET, prefix, str(delay_ms)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE)
    try:
        line = server.stdout.readline().decode()
        if not line.startswith("serving"):
            raise RuntimeError(f"the latency store did not start: {line!r}")
        yield f"http://127.0.0.1:{line.split()[1]}"
    finally:
        server.kill()
        server.wait()


def set_delay(store: str, ms: float) -> None:
    """Sets a running store's delay."""
    urllib.request.urlopen(urllib.request.Request(f"{store}/_delay?ms={ms}", method="POST"))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    delay = float(arguments[3]) if len(arguments) > 3 else DELAY_MS
    asyncio.run(serve(arguments[0], arguments[1], arguments[2], delay))
