"""What a conversion prints when it ends: the version's table of splits, or a remote job's
counters."""

from tfrecord_pipeline.dataset.metadata import DatasetInfo


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def format_summary(info: DatasetInfo, folder: str) -> str:
    """The table printed at the end of a run: per split examples, shards, bytes and errors."""
    rows = [("split", "examples", "shards", "size", "errors")]
    for name, split in sorted(info.splits.items()):
        rows.append(
            (
                name,
                f"{split.examples:,}",
                str(len(split.shards)),
                _mb(split.bytes),
                f"{split.errors:,}",
            )
        )
    unsplit = info.errors - sum(s.errors for s in info.splits.values())
    total_bytes = sum(s.bytes for s in info.splits.values())
    shard_total = sum(len(s.shards) for s in info.splits.values())
    rows.append(
        ("total", f"{info.records:,}", str(shard_total), _mb(total_bytes), f"{info.errors:,}")
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    if unsplit:
        lines.append(f"rows with no split (unparsed lines, unlisted folders): {unsplit:,}")
    if info.errors:
        reasons = ", ".join(f"{r}: {n:,}" for r, n in info.errors_by_reason.items())
        lines.append(f"rejected rows by reason: {reasons}  (errors/*.jsonl)")
    if flat := info.errors_by_reason.get("flat_archive"):
        archives = "an archive gave" if flat == 1 else f"{flat:,} archives gave"
        lines.append(
            f"{archives} no rows: its images lie at its top, in no class folder; label them "
            "with --ground_truth FILE (docs/inputs.md#archives)"
        )
    if info.skipped_files:
        lines.append(f"{info.skipped_files:,} non-image files or deeper folders skipped in trees")
    if info.boxes_dropped:
        by_split = ", ".join(
            f"{name} {split.boxes_dropped:,}"
            for name, split in sorted(info.splits.items())
            if split.boxes_dropped
        )
        lines.append(f"boxes dropped, no area inside their image: {by_split}")
    if info.negatives_dropped:
        left_out = info.negatives_dropped
        lines.append(f"{left_out:,} images without objects left out (--drop_negatives)")
    if info.refresh:
        lines += refresh_lines(info.refresh)
    state = "published" if not info.failures else "NOT published"
    lines.append(f"version: {folder}  ({state})")
    return "\n".join(lines)


def refresh_lines(counts: dict) -> list[str]:
    """What a refresh made its version of, and the damaged shards it found and did not carry."""
    kept = counts["carried"] + counts["rewritten"]
    lines = [
        f"refresh: rows {kept:,} kept, {counts['converted']:,} converted (new or changed), "
        f"{counts['dropped']:,} dropped (gone or changed); shards {counts['shards_carried']:,} "
        f"carried, {counts['shards_rewritten']:,} rewritten, {counts['shards_new']:,} new"
    ]
    if counts["damaged"]:
        shown = ", ".join(counts["damaged"][:3]) + (", ..." if len(counts["damaged"]) > 3 else "")
        lines.append(
            f"damaged in the published version, not carried: {len(counts['damaged']):,} "
            f"shards ({shown}); their {counts['reconverted']:,} unchanged rows converted again"
        )
    return lines


def format_counters(counters: dict[str, int]) -> str:
    """The job's own counters (from Beam metrics), as printed after a remote run."""
    errors = {k.removeprefix("error_"): v for k, v in counters.items() if k.startswith("error_")}
    line = (
        f"rows read: {counters.get('rows', 0):,}  images ok: {counters.get('records', 0):,}  "
        f"bytes written: {counters.get('bytes', 0):,}  errors: {sum(errors.values()):,}"
    )
    if errors:
        line += " (" + ", ".join(f"{k} {v:,}" for k, v in sorted(errors.items())) + ")"
    return line
