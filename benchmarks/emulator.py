"""The Cloud Storage JSON API on loopback (gcp-storage-emulator), for the benchmarks that
measure gs:// work: `with storage_emulator() as (env, bucket): ...`."""

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

BUCKET = "tfrp-bench"
# Google credential discovery must never leave this machine (as in tests/conftest.py).
OFFLINE = {
    "NO_GCE_CHECK": "true",
    "GCE_METADATA_HOST": "127.0.0.1:9",
    "GCE_METADATA_IP": "127.0.0.1:9",
    "GOOGLE_CLOUD_PROJECT": "bench",
}


@contextlib.contextmanager
def storage_emulator(log=subprocess.DEVNULL):
    """The GCS JSON API on a free loopback port, with one bucket: yields the environment that
    points a process at it, and the bucket. `log`, a file open for writing, gets the server's
    request log: a line a request (`"GET /path HTTP/1.1" 200 -`)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    emulator = str(Path(sys.executable).parent / "gcp-storage-emulator")
    command = [emulator, "start", "--host=127.0.0.1", f"--port={port}", "--in-memory"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
    host = f"http://127.0.0.1:{port}"
    env = {**os.environ, **OFFLINE, "STORAGE_EMULATOR_HOST": host}
    try:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        client = storage.Client(
            "bench", AnonymousCredentials(), client_options={"api_endpoint": host}
        )
        for _ in range(100):
            with contextlib.suppress(Exception):  # the server is still starting
                client.create_bucket(BUCKET, project="bench")
                break
            time.sleep(0.1)
        yield env, client.bucket(BUCKET)
    finally:
        server.kill()
        server.wait()


def arrow_store():
    """pyarrow's C++ Cloud Storage client pointed at the emulator this process's environment
    names: the floor the benchmarks measure the project's requests against."""
    from pyarrow import fs

    host = os.environ["STORAGE_EMULATOR_HOST"].removeprefix("http://")
    return fs.GcsFileSystem(anonymous=True, endpoint_override=host, scheme="http")


@contextlib.contextmanager
def environment(env: dict):
    """This process's environment set to `env` while the block runs."""
    before = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)
