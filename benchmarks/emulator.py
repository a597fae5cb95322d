"""The Cloud Storage JSON API on loopback (gcp-storage-emulator), for the benchmarks that
measure gs:// work: `with storage_emulator() as (env, bucket): ...`."""

import contextlib
import os
import socket
import subprocess
import sys
import time

BUCKET = "tfrp-bench"
# Google credential discovery must never leave this machine (as in tests/conftest.py).
OFFLINE = {
    "NO_GCE_CHECK": "true",
    "GCE_METADATA_HOST": "127.0.0.1:9",
    "GCE_METADATA_IP": "127.0.0.1:9",
    "GOOGLE_CLOUD_PROJECT": "bench",
}


# The emulator serves one connection at a time, each closed after its answer, behind the
# standard library's listen queue of 5: clients opening more connections at once than that lose
# SYNs and wait a second or more to be heard, which Cloud Storage never makes them do. Whole runs
# then take many times their work's time, and Beam's job server and harness, which spend CPU by
# the second while a job runs, are charged for the emulator's queue. A queue of 1,024 keeps the
# emulator itself as it is and only lets every connection in.
_LAUNCH = (
    "import socketserver, sys; socketserver.TCPServer.request_queue_size = 1024; "
    "from gcp_storage_emulator.__main__ import main; sys.exit(main())"
)


@contextlib.contextmanager
def storage_emulator(log=subprocess.DEVNULL):
    """The GCS JSON API on a free loopback port, with one bucket: yields the environment that
    points a process at it, and the bucket. `log`, a file open for writing, gets the server's
    request log: a line a request (`"GET /path HTTP/1.1" 200 -`)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-c", _LAUNCH, "start", "--host=127.0.0.1", f"--port={port}"]
    command.append("--in-memory")
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
