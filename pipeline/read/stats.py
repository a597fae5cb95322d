"""`tfrecord-pipeline stats OUTPUT -o report.html`: one self-contained page about a dataset.

Examples and bytes per split, the label histogram, image sizes, the spread of shard sizes and
the error reasons. The charts are HTML bars, not pictures: the page opens offline, its text is
the browser's (full shard and label names, at the reader's font size), and the bars take the
width of the window.
"""

import html
from collections import Counter

from tfrecord_pipeline.dataset.labels_file import label_names
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.read.reader import examples, open_dataset, out_extension, write_out

SIZE_BUCKET = 64  # pixels per histogram bucket of the longer image side


# Bar rows are table rows: the names' column is as wide as the longest name, never cut, and the
# bars share the rest of the page.
_STYLE = """
body { font-family: sans-serif; margin: 2em; }
h1 { overflow-wrap: anywhere; }
td, th { padding: 2px 10px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
table.bars { width: 100%; border-collapse: collapse; }
table.bars th { font-weight: normal; white-space: nowrap; }
table.bars td.bar { width: 100%; padding: 2px 0; }
table.bars td.bar div { background: #4285f4; height: 1.1em; min-width: 1px;
                        print-color-adjust: exact; -webkit-print-color-adjust: exact; }
table.bars td:last-child { white-space: nowrap; font-variant-numeric: tabular-nums; }
"""


def _size(size: float) -> str:
    """Bytes in the unit a person reads them in: `82 KB`, `148.3 MB`."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size / 1e3:,.0f} KB"


def _bars(bars: list[tuple[str, float]], show=lambda value: f"{value:,}") -> str:
    """A horizontal bar chart: one row per (name, value), the longest bar the full width."""
    top = max((value for _, value in bars), default=0) or 1
    rows = "".join(
        f"<tr><th scope='row'>{html.escape(str(name))}</th>"
        f"<td class='bar'><div style='width:{100 * value / top:.2f}%'></div></td>"
        f"<td>{html.escape(show(value))}</td></tr>"
        for name, value in bars
    )
    return f"<table class='bars'>{rows}</table>"


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
    names = label_names(output, info)
    offset = info.labels["offset"]
    labels: Counter = Counter()
    for split in info.splits.values():
        labels.update({int(k): v for k, v in split.label_counts.items()})

    def label_name(label_id: int) -> str:
        index = label_id - offset
        text = names[index] if info.labels["kind"] == "names" and 0 <= index < len(names) else ""
        return f"{label_id} {text}".strip()

    shards = [(s.file, s.bytes) for split in info.splits.values() for s in split.shards]
    sizes = sorted(_sizes(output, info).items())
    splits = [
        (n, f"{s.examples:,}", len(s.shards), _size(s.bytes), f"{s.errors:,}")
        for n, s in sorted(info.splits.items())
    ]
    sections = [
        f"<h1>{html.escape(output)}</h1>",
        f"<p>{info.records:,} records from {info.rows_in:,} rows; {info.errors:,} rejected; "
        f"{'committed' if not info.failures else 'NOT committed'}; tool {info.tool_version}</p>",
        _table(("split", "examples", "shards", "size", "errors"), splits),
        "<h2>Examples per label</h2>",
        _bars([(label_name(k), v) for k, v in sorted(labels.items())]),
        "<h2>Images by longer side (pixels)</h2>",
        _bars([(f"{s}–{s + SIZE_BUCKET - 1}", n) for s, n in sizes]),
        "<h2>Shard sizes</h2>",
        _bars(shards, _size),
        "<h2>Rejected rows</h2>",
        _table(("reason", "rows"), sorted(info.errors_by_reason.items()))
        if info.errors
        else "<p>none</p>",
    ]
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width'>"
        f"<title>{html.escape(output)}: dataset stats</title>"
        f"<style>{_STYLE}</style></head><body>{''.join(sections)}</body></html>"
    )


def stats(output: str, target: str) -> None:
    """Write the report on the dataset `output` to `target`, an HTML file (local or gs://)."""
    out_extension(target, (".html", ".htm"), "stats")  # before reading anything
    write_out(target, report(*open_dataset(output)).encode("utf-8"))
