"""Peak memory of a conversion: the launcher and every worker process it starts.

Runs `tfrecord-pipeline convert` on a corpus of N images (benchmarks/corpus.py) and samples
/proc every 50 ms; reports images/s, the peak summed RSS of the process tree and the peak RSS
of its largest single process. Run: python benchmarks/peak_rss.py N [N ...] [-- convert flags]
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from corpus import make_corpus

BIN = Path(sys.executable).parent / "tfrecord-pipeline"


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        try:
            threads = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for thread in threads:  # a child belongs to the thread that started it
            try:
                with open(f"/proc/{current}/task/{thread}/children") as handle:
                    queue += [int(child) for child in handle.read().split()]
            except OSError:
                pass
    return pids


def measure(manifest: Path, flags: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as out:
        command = [str(BIN), "convert", "--manifest", str(manifest), "--output", out,
                   "--no_progress", *flags]  # fmt: skip
        start = time.monotonic()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak_sum = peak_one = 0
        while process.poll() is None:
            sizes = [_rss_kb(pid) for pid in _tree(process.pid)]
            peak_sum, peak_one = max(peak_sum, sum(sizes)), max(peak_one, max(sizes))
            time.sleep(0.05)
        seconds = time.monotonic() - start
        if process.returncode:
            raise SystemExit(process.stderr.read().decode())
        records = json.loads((Path(out) / "dataset_info.json").read_text())["records"]
    return {
        "images": records,
        "seconds": round(seconds, 2),
        "images_per_s": round(records / seconds, 1),
        "peak_rss_tree_mb": round(peak_sum / 1024, 1),
        "peak_rss_process_mb": round(peak_one / 1024, 1),
    }


if __name__ == "__main__":
    args = sys.argv[1:]
    split = args.index("--") if "--" in args else len(args)
    counts, flags = [int(n) for n in args[:split]], args[split + 1 :]
    root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    for count in counts:
        manifest = make_corpus(root / f"tfrp-corpus-{count}", count)
        print(json.dumps({"flags": flags, **measure(manifest, flags)}), flush=True)
