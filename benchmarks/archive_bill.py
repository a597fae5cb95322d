"""The archive rows of docs/costs.md: dataflow_bill.py's model of a Dataflow conversion, given
the requests per image a conversion of a folder of tars on `gs://` makes
(benchmarks/archive_requests.py, results/archive-requests.json), every other figure a loose
image's (archives.py measures CPU per image from a tar within a few percent of loose files')."""

from dataflow_bill import HEADS, READERS, Prices, bill_cells, images, reads_needed


def archive_table(measured: dict, prices: Prices) -> str:
    """This converter on folders of tars on `gs://`, pass-through: a loose image's figures but
    the requests an image its whole run made, counted for each case."""
    archives = measured["archives"]
    cases = {
        f"{name} (counted)": n["whole_run"]["gets_per_image"]
        for name, n in archives["layouts"].items()
        if "loose" not in name  # the loose rows above price those
    }
    lines = [
        f"| tars, pass-through | requests an image | {' | '.join(HEADS)} |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, requests in cases.items():
        loose = images(measured, READERS[0])["pass-through"]
        image = loose._replace(requests=requests, in_flight=reads_needed(loose.cpu_us, requests))
        lines.append(
            f"| {label} | {requests:g} | {bill_cells(image, READERS[0], measured, prices)}"
        )
    return "\n".join(lines)
