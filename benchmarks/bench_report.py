"""What a sitting of bench.py prints and draws: each run's line and each ratio against its
target, the bar chart, and the README's table from the result files (`bench.py --table`)."""

from pathlib import Path

from charts import bar_chart

CONVERSION = "conversion_images_per_s"  # a run's conversion rate, its start-up left out


def print_report(report: dict) -> None:
    """Each run's median rate, memory, start-up and conversion rate where timed apart, and what
    it checks; then each ratio against its target."""
    for name, result in report["runs"].items():
        if "skipped" in result:
            print(f"{name:22s} skipped: {result['skipped']}", flush=True)
            continue
        apart = ""
        if "conversion_s" in result:
            apart = f"  start-up {result['startup_s']:.2f} s, then {result[CONVERSION]:,.1f} img/s"
        print(
            f"{name:22s} {result['images_per_s']:9.1f} img/s (median)  "
            f"{result['peak_rss_tree_mb']:7.1f} MB{apart}  checks {result['checks']}",
            flush=True,
        )
    for ratio in report["ratios"]:
        if ratio["value"] is None:
            print(f"skip {ratio['ratio']:45s}  (a run of it was skipped)")
            continue
        if ratio["target"] is None:
            print(f"    {ratio['ratio']:45s} {ratio['value']:6.2f}  (no target)")
            continue
        mark = "ok " if ratio["value"] >= ratio["target"] else "MISS"
        print(f"{mark} {ratio['ratio']:45s} {ratio['value']:6.2f}  (target {ratio['target']})")


def write_chart(report: dict, path: Path) -> None:
    """images/s per run that ran; the converter's runs in blue."""
    runs = report["runs"].items()
    bars = [(name, result["images_per_s"]) for name, result in runs if "skipped" not in result]
    title = f"images/s, {report['images']:,} images, {report['machine']}"
    path.write_bytes(bar_chart(bars, title, lambda name: "converter" in name or "worker" in name))


def cells(run: dict | None) -> tuple[str, str]:
    """A run's images/s and peak RSS as the table shows them: "skipped" where the run could
    not start, "—" where its sitting had no such run (a result file older than the run)."""
    if run is None:
        return "—", "—"
    if "skipped" in run:
        return "skipped", "skipped"
    return f"{run['images_per_s']:,.0f}", f"{run['peak_rss_tree_mb']:,.0f} MB"


def ratio_cell(report: dict, label: str) -> str:
    value = next((r["value"] for r in report["ratios"] if r["ratio"] == label), None)
    return "—" if value is None else f"{value:.2f}"


def markdown_table(reports: list[dict]) -> str:
    """The README's table: images/s and peak RSS per run and corpus size, then the ratios."""
    sizes = [f"{r['images']:,}" for r in reports]
    head = "| run | " + " | ".join(f"img/s ({n})" for n in sizes)
    head += " | " + " | ".join(f"peak RSS ({n})" for n in sizes) + " |"
    lines = [head, "|---" + "|---:" * (2 * len(reports)) + "|"]
    for name in dict.fromkeys(name for r in reports for name in r["runs"]):
        speeds, memory = zip(*(cells(r["runs"].get(name)) for r in reports), strict=True)
        lines.append(f"| {name} | " + " | ".join(speeds + memory) + " |")
    lines += [
        "",
        "| ratio | " + " | ".join(sizes) + " | target |",
        "|---" + "|---:" * (len(reports) + 1) + "|",
    ]
    targets = {ratio["ratio"]: ratio["target"] for r in reports for ratio in r["ratios"]}
    for label, target in targets.items():
        values = [ratio_cell(r, label) for r in reports]
        bound = "—" if target is None else f"≥ {target}"
        lines.append(f"| {label} | " + " | ".join(values) + f" | {bound} |")
    return "\n".join(lines + [""] + memory_lines(reports))


def memory_lines(reports: list[dict]) -> list[str]:
    """Run 6's memory targets: growth from the smallest to the largest corpus, biggest process."""
    converter = [r["runs"]["6 converter"] for r in reports]
    biggest = max(run["peak_rss_process_mb"] for run in converter)
    lines = [f"- converter, largest single process: {biggest:,.0f} MB (target ≤ 250 MB)"]
    if len(reports) > 1:
        growth = converter[-1]["peak_rss_tree_mb"] / converter[0]["peak_rss_tree_mb"]
        lines.append(
            f"- converter peak RSS, {reports[-1]['images']:,} vs {reports[0]['images']:,} "
            f"images: {growth:.2f}x (target ≤ 1.2x)"
        )
    return lines
