"""The peers PyTorch users pick to pack images for training, written as their docs show; both
need torch, which the project never installs: run them with .venv-peers/bin/python
(`make bench-peers`), through peers.py.

litdata_optimize  LitData's optimize(): a function of one input returns the sample (the image
                  opened with Pillow, its label), workers on every core, 64 MB chunks (its
                  quick-start's call); it stores a JPEG's file bytes as they are
mds_writer        MosaicML Streaming's MDSWriter on a process pool, as its guide to parallel
                  conversion writes it: the inputs in groups, each group written by a pool
                  process into a folder of its own, then merge_index(); a `jpeg` column of
                  images opened with Pillow (it stores the file's bytes as they are)

Neither checks an image: Pillow's open() reads the header, not the scans.
"""

import importlib.util
import os
from functools import partial
from pathlib import Path

LABEL = "label"
_DECLARED = []  # torch.library.Library objects: their definitions last as long as they do


def _declare_torchvision_ops() -> None:
    """`import streaming` imports torchvision, which fails where its compiled operators cannot
    load: PyPI's torchvision is CUDA's build, and beside torch's CPU build (a wheel folder's,
    where PyTorch's own index, which has a CPU torchvision, is out of reach) it registers
    shapes for nms and qnms, operators its library did not define. Declaring the two lets the
    import through; MDSWriter never calls them. With a torchvision that loads, nothing is done."""
    import torch

    if _DECLARED:
        return
    folder = importlib.util.find_spec("torchvision").submodule_search_locations[0]
    try:
        torch.ops.load_library(os.path.join(folder, "_C.so"))
    except OSError:
        library = torch.library.Library("torchvision", "FRAGMENT")
        for op in ("nms", "qnms"):
            library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _DECLARED.append(library)


def import_mds():
    """MosaicML Streaming's writer and its merge of the pool's indexes."""
    _declare_torchvision_ops()
    from streaming import MDSWriter
    from streaming.base.util import merge_index

    return MDSWriter, merge_index


def import_litdata():
    """LitData's optimize()."""
    from litdata import optimize
    from PIL import Image  # noqa: F401 (each sample's image: imported before the first)

    return optimize


def _sample(labels: dict[str, int], row: tuple[str, str]) -> dict:
    """An image as both peers' docs write one: opened with Pillow, with its label's id."""
    from PIL import Image

    path, label = row
    return {"image": Image.open(path), LABEL: labels[label]}


def litdata_optimize(rows, labels: dict[str, int], out: Path) -> None:
    optimize = import_litdata()
    optimize(
        fn=partial(_sample, labels),
        inputs=rows,
        output_dir=str(out),
        chunk_bytes="64MB",
        num_workers=os.cpu_count(),
    )


def _write_group(labels: dict[str, int], task: tuple[str, list]) -> int:
    """One pool process's group: its own MDSWriter into its own folder."""
    writer, _ = import_mds()  # already imported: the pool's processes are forks
    folder, rows = task
    with writer(out=folder, columns={"image": "jpeg", LABEL: "int"}) as out:
        for row in rows:
            out.write(_sample(labels, row))
    return len(rows)


def mds_writer(rows, labels: dict[str, int], out: Path) -> None:
    from multiprocessing import Pool

    _, merge_index = import_mds()
    groups = os.cpu_count()
    size = -(-len(rows) // groups)
    tasks = [(str(out / str(n)), rows[n * size : (n + 1) * size]) for n in range(groups)]
    with Pool(processes=os.cpu_count()) as pool:
        for _ in pool.imap(partial(_write_group, labels), tasks):
            pass
    merge_index(str(out), keep_local=True)


# What each imports before its first image: a run of peers.py's `imports` times them alone.
IMPORTS = {"litdata_optimize": import_litdata, "mds_writer": import_mds}


def indexed(out: Path, entries: str, count: str) -> int:
    """Samples a dataset's index.json says it holds: the sum of `count` over its `entries`."""
    import json

    index = json.loads((out / "index.json").read_text())
    return sum(entry[count] for entry in index[entries])
