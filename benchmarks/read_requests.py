"""Cloud Storage requests per `gs://` image for each reader of benchmarks/gcs_read_cost.py,
counted in the emulator's request log: `python benchmarks/read_requests.py 200`.

Each reader runs as gcs_read_cost runs it (a fresh process, 16 threads) over the first N objects
and over the first N/4; per object, the difference between the requests the server logged for
the two runs over the objects between them, so a client's start-up requests (a bucket lookup,
credentials) cancel out, as start-up CPU does in gcs_read_cost. Requests bill and wait: each is a
Cloud Storage operation and a round trip. Writes benchmarks/results/read-requests.json.
"""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import gcs_read_cost
from emulator import storage_emulator

HERE = Path(__file__).resolve().parent
REQUEST = re.compile(rb'^"[A-Z]+ /\S* HTTP/1\.[01]"', re.M)  # the request of a server log line


def requests_of(reader: str, listing: Path, count: int, log: Path, env: dict) -> int:
    """The distinct requests the server logged while one fresh process read the first `count`
    objects: a request a client sent again (the Python client retries one the loaded emulator
    answers late) is one request of the reader's, not two."""
    before = log.stat().st_size
    command = [sys.executable, gcs_read_cost.__file__, "--child", reader, str(listing), str(count)]
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if done.returncode:
        raise RuntimeError(f"{reader} failed: {done.stderr.decode()[-2000:]}")
    with log.open("rb") as logged:
        logged.seek(before)
        return len(set(REQUEST.findall(logged.read())))


def main(count: int, readers: tuple[str, ...] = gcs_read_cost.READERS) -> dict:
    small = max(1, count // gcs_read_cost.SMALL_SHARE)
    per_object = {}
    with tempfile.TemporaryDirectory() as scratch:
        log, listing = Path(scratch) / "requests.log", Path(scratch) / "paths.txt"
        with log.open("wb") as sink, storage_emulator(sink) as (env, bucket):
            paths, _, kb = gcs_read_cost.upload(bucket, count)
            listing.write_text("\n".join(paths) + "\n")
            for reader in readers:
                runs = [requests_of(reader, listing, n, log, env) for n in (small, count)]
                per_object[reader] = round((runs[1] - runs[0]) / (count - small), 2)
                print(f"{reader:10s} {per_object[reader]:g} requests an object", flush=True)
    return {"objects": count, "mean_object_kb": round(kb, 1), "requests_per_object": per_object}


if __name__ == "__main__":
    report = main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "read-requests.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {results}/read-requests.json")
