"""Peak memory of a conversion: the launcher and every worker process it starts.

Runs `tfrecord-pipeline convert` on a corpus of N images (benchmarks/corpus.py) and samples
/proc every 50 ms; reports images/s, the peak summed RSS of the process tree and the peak RSS
of its largest single process. Run: python benchmarks/peak_rss.py N [N ...] [-- convert flags]
"""

import json
import os
import sys
import tempfile
from pathlib import Path

from corpus import make_corpus
from measure import run_measured

BIN = Path(sys.executable).parent / "tfrecord-pipeline"


def measure(manifest: Path, flags: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as out:
        command = [str(BIN), "convert", "--manifest", str(manifest), "--output", out]
        result = run_measured([*command, "--no_progress", *flags])
        records = json.loads((Path(out) / "tfrecord_pipeline.json").read_text())["records"]
    return {"images": records, "images_per_s": round(records / result["seconds"], 1), **result}


if __name__ == "__main__":
    args = sys.argv[1:]
    split = args.index("--") if "--" in args else len(args)
    counts, flags = [int(n) for n in args[:split]], args[split + 1 :]
    root = Path(os.environ.get("CORPUS_DIR", tempfile.gettempdir()))
    for count in counts:
        manifest = make_corpus(root / f"tfrp-corpus-{count}", count)
        print(json.dumps({"flags": flags, **measure(manifest, flags)}), flush=True)
