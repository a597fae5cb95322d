"""Memory of reading a COCO file: `python benchmarks/coco_memory.py [--masks] [N ...]`
(default 100 100000 1000000 annotations).

For each N, a synthetic COCO instances file of N annotations over N / 7 images (COCO's own
ratio), 80 categories, every annotation with a box, an area and a small polygon, as COCO's
carry. A fresh process reads it as the converter does (transforms/manifest/sources.py `read_coco`:
the document parsed whole, then its rows made) and keeps the rows, as the local runner and the Beam
step's output hold them; its peak RSS is the kernel's high-water mark (`VmHWM`). With
`--masks` the rows keep their polygons (the converter's --masks). Writes
benchmarks/results/coco-memory.json (coco-memory-masks.json).
"""

import json
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PER_IMAGE = 7


def write_coco(path: Path, annotations: int) -> None:
    rng = random.Random(annotations)
    images = max(1, annotations // PER_IMAGE)
    document = {
        "images": [
            {"id": i, "file_name": f"{i:012d}.jpg", "width": 640, "height": 480}
            for i in range(images)
        ],
        "annotations": [],
        "categories": [{"id": c, "name": f"category {c}"} for c in range(1, 81)],
    }
    for index in range(annotations):
        x, y = rng.uniform(0, 500), rng.uniform(0, 400)
        w, h = rng.uniform(1, 140), rng.uniform(1, 80)
        polygon = [round(rng.uniform(0, 640), 2) for _ in range(16)]
        document["annotations"].append(
            {
                "id": index,
                "image_id": index % images,
                "category_id": rng.randint(1, 80),
                "bbox": [round(v, 2) for v in (x, y, w, h)],
                "area": round(w * h * 0.7, 2),
                "iscrowd": 0,
                "segmentation": [polygon],
            }
        )
    path.write_text(json.dumps(document))


_READ = """
import sys
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig
from tfrecord_pipeline.transforms.manifest import sources
config = ReadConfig(masks=sys.argv[2] == "masks")
manifests = sources.check_manifests([sys.argv[1]], config)
config = sources.detection_config(manifests, config)
rows = [item for manifest in manifests for item in sources.read_all(manifest, config)]
status = open("/proc/self/status").read()
peak = next(line for line in status.splitlines() if line.startswith("VmHWM"))
print(len(rows), int(peak.split()[1]) // 1024)
"""


def measure(annotations: int, masks: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "instances.json"
        write_coco(path, annotations)
        size = path.stat().st_size
        started = time.perf_counter()
        command = [sys.executable, "-c", _READ, str(path), "masks" if masks else "boxes"]
        done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=HERE.parent)
        seconds = time.perf_counter() - started
    rows, peak_mb = map(int, done.stdout.split())
    return {
        "annotations": annotations,
        "rows": rows,
        "file_mb": round(size / 2**20, 1),
        "peak_rss_mb": peak_mb,
        "seconds": round(seconds, 2),
    }


if __name__ == "__main__":
    masks = "--masks" in sys.argv[1:]
    counts = [int(n) for n in sys.argv[1:] if n != "--masks"] or [100, 100_000, 1_000_000]
    results = [measure(n, masks) for n in counts]
    for result in results:
        print(json.dumps(result), flush=True)
    out = HERE / "results" / ("coco-memory-masks.json" if masks else "coco-memory.json")
    out.write_text(json.dumps({"machine": platform.machine(), "results": results}, indent=1))
