"""Issue 46's figures in one sitting: `make bench-sitting` (or `python benchmarks/sitting.py`).

Runs, one after another on one machine: bench.py on 20,000 images (every run, the peers too
when `.venv-peers` is made), bench.py on 200,000 images with the runs whose ratios are held
at that size (SCALE_RUNS), image_costs.py (a resize's CPU an image beside the Pillow and
OpenCV loops) and gcs_read_cost.py (gs:// CPU an image against the checked floor fed by a C++
client); then prints each ratio the issue holds, from the files those write, against its
target. `python benchmarks/sitting.py --summary` prints it from the files already there.
"""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
IMAGES, SCALE_IMAGES, COST_IMAGES, GCS_OBJECTS = 20_000, 200_000, 2_000, 2_000
SCALE_RUNS = "6 converter,5 checked floor,5 kept floor,6 markers,9 MDS,9 LitData,9 TFDS builder"
GCS_READERS = "convert-local,convert-defaults,floor,floor_checked"


def _bench_ratio(report: dict, label: str) -> float | None:
    """bench.py's ratio of that label; None when a run of it was skipped."""
    found = [r["value"] for r in report["ratios"] if r["ratio"] == label]
    return found[0] if found else None


def _cost_ratio(report: dict, label: str) -> float | None:
    """image_costs.py's ratio of that label."""
    return round(report["ratios"][label], 2)


def _gcs_over_checked(report: dict, label: str) -> float | None:
    """gcs_read_cost.py's reader (the label's second word) over the checked floor, CPU an image,
    paired round by round (its `paired_ratio`)."""
    reader = report["readers"].get(label.split()[1])
    return None if reader is None else reader["over_floor_checked"]


class Held(NamedTuple):
    """One ratio the sitting holds: the file it is read from and how, and the least (or most)
    it may be (None: reported beside the others, held to nothing)."""

    item: str
    label: str
    file: str
    target: float | None
    at_most: bool = False
    read: Callable[[dict, str], float | None] = _bench_ratio


def held() -> list[Held]:
    """Every ratio the issue holds, in its items' order."""
    bench, scale = f"bench-{IMAGES}.json", f"subset-{SCALE_IMAGES}.json"
    gcs, costs = f"gcs-read-cost-{GCS_OBJECTS}-partial.json", "image-costs.json"
    return [
        Held("1", "resize: writer / Pillow loop", costs, 1.1, read=_cost_ratio),
        Held("1", "resize: writer / turbo + OpenCV area", costs, 0.95, read=_cost_ratio),
        *(Held("3", "converter / checked floor", file, 0.85) for file in (bench, scale)),
        *(
            Held("3", label, file, None)
            for label in ("converter / kept floor", "kept floor / checked floor")
            for file in (bench, scale)
        ),
        *(
            Held("3", f"gs:// {reader} / checked floor", gcs, 1.5, True, _gcs_over_checked)
            for reader in ("convert-local", "convert-defaults")
        ),
        *(
            Held("4", f"markers conversion / {peer} conversion", file, 1.0)
            for file in (bench, scale)
            for peer in ("MDS", "LitData")
        ),
        Held("5", "converter / TFDS builder", bench, 1.0),
        Held("5", "converter / Ray Data", bench, 1.0),
    ]


def measured(ratio: Held) -> float | None:
    """The ratio as the sitting's files give it; None when its run was skipped or not made."""
    path = RESULTS / ratio.file
    return ratio.read(json.loads(path.read_text()), ratio.label) if path.exists() else None


def summary() -> str:
    lines = ["| item | ratio | file | measured | target |", "|---|---|---|---:|---|"]
    for ratio in held():
        value = measured(ratio)
        bound = (
            f"{'≤' if ratio.at_most else '≥'} {ratio.target}" if ratio.target is not None else "—"
        )
        if value is None:
            shown = "not run"
        elif ratio.target is None:
            shown = f"{value:.2f}"
        else:
            met = value <= ratio.target if ratio.at_most else value >= ratio.target
            shown = f"{value:.2f}{'' if met else ' (missed)'}"
        lines.append(f"| {ratio.item} | {ratio.label} | {ratio.file} | {shown} | {bound} |")
    return "\n".join(lines)


def sit() -> None:
    """Every script of the sitting, in turn, each printing its own figures as it goes."""
    python = sys.executable
    steps = [
        ([python, "bench.py", str(IMAGES)], {}),
        ([python, "bench.py", str(SCALE_IMAGES)], {"BENCH_RUNS": SCALE_RUNS}),
        ([python, "image_costs.py", str(COST_IMAGES)], {}),
        ([python, "gcs_read_cost.py", str(GCS_OBJECTS), GCS_READERS], {}),
    ]
    for command, extra in steps:
        print(f"== {' '.join(command[1:])} {extra or ''}", flush=True)
        subprocess.run(command, cwd=HERE, env={**os.environ, **extra}, check=True)


if __name__ == "__main__":
    if sys.argv[1:] != ["--summary"]:
        sit()
    print(summary())
