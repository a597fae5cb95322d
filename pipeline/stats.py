"""`tfrecord-pipeline stats OUTPUT -o report.html`: one self-contained page about a dataset.

Examples and bytes per split, the label histogram, image sizes, the spread of shard sizes and
the error reasons. Charts are PNGs inside the HTML (data: URLs), so it opens offline.
"""

import base64
import html
from collections import Counter

from pipeline.charts import bar_chart
from pipeline.metadata import DatasetInfo
from pipeline.reader import examples, open_dataset
from transforms import fileio

SIZE_BUCKET = 64  # pixels per histogram bucket of the longer image side


def _img(png: bytes) -> str:
    return f'<img alt="chart" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _table(header: tuple, rows: list[tuple]) -> str:
    cells = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{cells}</tr>{body}</table>"


def _sizes(output: str, info: DatasetInfo) -> Counter:
    """Longer image side, in buckets of SIZE_BUCKET pixels, over every record."""
    sides: Counter = Counter()
    for split in info.splits:
        for example in examples(output, info, split):
            side = max(example["image/height"], example["image/width"])
            sides[side // SIZE_BUCKET * SIZE_BUCKET] += 1
    return sides


def report(output: str, info: DatasetInfo) -> str:
    names = info.labels["names"]
    offset = info.labels["offset"]
    labels: Counter = Counter()
    for split in info.splits.values():
        labels.update({int(k): v for k, v in split.label_counts.items()})

    def label_name(label_id: int) -> str:
        index = label_id - offset
        text = names[index] if info.labels["kind"] == "names" and 0 <= index < len(names) else ""
        return f"{label_id} {text}".strip()

    shards = [(s.file, s.bytes / 1e3) for split in info.splits.values() for s in split.shards]
    sizes = sorted(_sizes(output, info).items())
    splits = [(n, f"{s.examples:,}", len(s.shards), f"{s.bytes / 1e6:,.1f} MB", f"{s.errors:,}")
              for n, s in sorted(info.splits.items())]  # fmt: skip
    sections = [
        f"<h1>{html.escape(output)}</h1>",
        f"<p>{info.records:,} records from {info.rows_in:,} rows; {info.errors:,} rejected; "
        f"{'committed' if not info.failures else 'NOT committed'}; tool {info.tool_version}</p>",
        _table(("split", "examples", "shards", "size", "errors"), splits),
        "<h2>Labels</h2>",
        _img(bar_chart([(label_name(k), v) for k, v in sorted(labels.items())], "examples")),
        "<h2>Image sizes (longer side, pixels)</h2>",
        _img(bar_chart([(f"{s}-{s + SIZE_BUCKET - 1}", n) for s, n in sizes], "images")),
        "<h2>Shard sizes (KB)</h2>",
        _img(bar_chart(shards, "KB per shard")),
        "<h2>Rejected rows</h2>",
        _table(("reason", "rows"), sorted(info.errors_by_reason.items()))
        if info.errors else "<p>none</p>",
    ]  # fmt: skip
    style = "body{font-family:sans-serif;margin:2em}td,th{padding:2px 10px;text-align:right}"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>dataset stats</title>"
        f"<style>{style}</style></head><body>{''.join(sections)}</body></html>"
    )


def stats(output: str, target: str) -> None:
    fileio.write_bytes(target, report(output, open_dataset(output)).encode("utf-8"))
