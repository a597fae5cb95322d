"""The Dataflow bill for 10^6-10^8 images, estimated from figures measured here:
`python benchmarks/dataflow_bill.py` prints the tables docs/costs.md holds, from the results the
benchmarks in SOURCES wrote to benchmarks/results/ (re-run those in one sitting, then this).

Measured, as whole processes (the result files name the machine; docs/costs.md the dates):
the CPU of one `gs://` image read (benchmarks/gcs_read_cost.py: this converter's read and Beam's
gcsio, each in a bare process on 16 threads against the Cloud Storage emulator on loopback), the
CPU of writing an image in a Beam worker (benchmarks/writer_cpu.py, the portable runner's SDK
harness process, its whole tree, local images, pass-through and re-encoding), the bytes a row
takes through the shuffle (benchmarks/dataflow_costs.py), and the requests a read makes
(benchmarks/read_requests.py, counted in the emulator's request log); for a folder of tars on
`gs://`, the requests a whole conversion makes per image (benchmarks/archive_requests.py).

Modelled: a vCPU of a Dataflow worker spends the sum of those CPU figures on an image; a request
waits LATENCY_MS; a reader keeping k reads in flight a vCPU is bound by the larger of its CPU
and (CPU + waits) / k; the worker's vCPUs are BUSY of the time; the prices are PRICES.
"""

import json
import math
from pathlib import Path
from typing import NamedTuple

RESULTS = Path(__file__).resolve().parent / "results"
SOURCES = {
    "read": "gcs-read-cost-2000.json",
    "pass-through": "writer-cpu-10000.json",
    "re-encoded": "writer-cpu-2000-resize_short_side-256-jpeg_quality-90.json",
    "shuffle": "dataflow-costs.json",
    "requests": "read-requests.json",
    "archives": "archive-requests.json",
}
ENGINE = "PortableRunner"  # an SDK harness in a process of its own: a Dataflow Runner v2 worker
LATENCY_MS = 40  # a small object's request from a worker, first byte to last
BUSY = 0.8  # the share of a worker's vCPU time the job's work gets (agents, start, tail)
ROWS = (10**6, 10**7, 10**8)
HEADS = [f"10^{round(math.log10(rows))} images" for rows in ROWS]
KINDS = ("pass-through", "re-encoded")  # re-encoded: --resize_short_side 256 --jpeg_quality 90
SHARD_MB = 150  # the default shard size
SHARD_REQUESTS = 27  # a shard's writes: 8 MB upload chunks, then its and its rows file's moves


class Prices(NamedTuple):
    """Dataflow's list prices for batch workers, and Cloud Storage's for requests (USD)."""

    vcpu_hour: float = 0.056
    memory_gb_hour: float = 0.003557
    disk_gb_hour: float = 0.000054  # standard Persistent Disk
    shuffle_gb: float = 0.011  # Dataflow Shuffle, batch, per GB processed
    class_a_per_1000: float = 0.005  # uploads, copies, deletes (Standard storage)
    class_b_per_1000: float = 0.0004  # reads, metadata reads
    where: str = "us-central1 (Iowa)"
    when: str = "2026-11-26"
    source: str = (
        "https://cloud.google.com/dataflow/pricing, https://cloud.google.com/storage/pricing"
    )


PRICES = Prices()


class Worker(NamedTuple):
    """Dataflow's default batch worker."""

    machine: str = "n1-standard-4"
    vcpus: int = 4
    memory_gb: float = 15
    disk_gb: float = 25  # the default boot disk of a batch job using Dataflow Shuffle

    def hourly(self, prices: Prices) -> float:
        return (
            self.vcpus * prices.vcpu_hour
            + self.memory_gb * prices.memory_gb_hour
            + self.disk_gb * prices.disk_gb_hour
        )


class Reader(NamedTuple):
    """How a pipeline reads an image: its figures' key in the read results, and the reads a
    vCPU keeps in flight (None: as many as keep the vCPU busy)."""

    label: str
    key: str
    in_flight: int | None
    shuffles_rows: bool  # rows cross a shuffle (this converter's shard plan); else nothing


READERS = (
    # Its shard writer's automatic --threads keep enough reads in flight to cover the latency.
    Reader("this converter", "converter", None, True),
    # A DoFn reads one image at a time (Beam 2.77's gcsio: the object's metadata, the bucket's,
    # then the media, one after the other), and a batch worker runs a thread a vCPU (the
    # Dataflow API's numThreadsPerWorker). WriteToTFRecord's default sharding shuffles nothing.
    Reader("Beam tutorial pipeline (gcsio)", "beam", 1, False),
    # The same, given threads enough to keep each vCPU busy (--number_of_worker_harness_threads).
    Reader("Beam tutorial pipeline (gcsio), threads enough", "beam", None, False),
)


class Image(NamedTuple):
    """One image's costs for one reader and one kind of conversion."""

    read_us: float
    write_us: float
    requests: float
    in_flight: int  # reads in flight a vCPU keeps

    @property
    def cpu_us(self) -> float:
        return self.read_us + self.write_us

    @property
    def vcpu_us(self) -> float:
        """The vCPU time an image holds: its CPU, or its share of the waits if they bind."""
        return max(self.cpu_us, (self.cpu_us + self.requests * LATENCY_MS * 1000) / self.in_flight)


def load(results: Path = RESULTS) -> dict:
    return {name: json.loads((results / file).read_text()) for name, file in SOURCES.items()}


def reads_needed(cpu_us: float, requests: float) -> int:
    """The reads in flight that keep a vCPU busy: an image's CPU and waits over its CPU."""
    return math.ceil((cpu_us + requests * LATENCY_MS * 1000) / cpu_us)


def images(measured: dict, reader: Reader) -> dict[str, Image]:
    read_us = measured["read"]["readers"][reader.key]["us_per_object"]
    requests = measured["requests"]["requests_per_object"][reader.key]
    costs = {}
    for kind in KINDS:
        write_us = measured[kind]["engines"][ENGINE]["us_per_image"]
        needed = reads_needed(read_us + write_us, requests)
        in_flight = needed if reader.in_flight is None else reader.in_flight
        costs[kind] = Image(read_us, write_us, requests, in_flight)
    return costs


class Bill(NamedTuple):
    worker_hours: float
    dollars: float


def bill(image: Image, rows: int, reader: Reader, measured: dict, prices: Prices) -> Bill:
    worker = Worker()
    worker_hours = rows * image.vcpu_us / 3.6e9 / worker.vcpus / BUSY
    mean_kb = measured["read"]["mean_object_kb"]
    shards = math.ceil(rows * mean_kb / 1024 / SHARD_MB)
    shuffle_gb = rows * measured["shuffle"]["measured"]["shuffle_bytes_per_row"] / 1e9
    dollars = (
        worker_hours * worker.hourly(prices)
        + (shuffle_gb * prices.shuffle_gb if reader.shuffles_rows else 0)
        + rows * image.requests * prices.class_b_per_1000 / 1000
        + shards * SHARD_REQUESTS * prices.class_a_per_1000 / 1000
    )
    return Bill(worker_hours, dollars)


def figure(value: float) -> str:
    """Three significant digits, thousands separated."""
    digits = max(0, 2 - math.floor(math.log10(abs(value)))) if value else 0
    return f"{value:,.{digits}f}"


def price(value: float) -> str:
    return f"${value:.6f}".rstrip("0")


def per_image_table(measured: dict) -> str:
    """For each reader, an image's measured CPU and requests and the modelled vCPU time."""
    costs = [images(measured, reader) for reader in READERS]
    lines = [
        "| per image | " + " | ".join(reader.label for reader in READERS) + " |",
        "|---|" + "---:|" * len(READERS),
    ]
    cells = {
        "CPU of its `gs://` read (measured)": lambda image: f"{figure(image.read_us)} µs",
        "CPU writing it{} (measured: this converter's)": lambda image: (
            f"{figure(image.write_us)} µs"
        ),
        "Cloud Storage requests (counted)": lambda image: f"{image.requests:g}",
        "reads in flight a vCPU keeps{} (modelled)": lambda image: str(image.in_flight),
        "vCPU time it holds{} (modelled)": lambda image: f"{figure(image.vcpu_us)} µs",
    }
    for label, cell in cells.items():
        for kind in KINDS if "{}" in label else KINDS[:1]:
            name = label.format(f", {kind}")
            lines.append(f"| {name} | " + " | ".join(cell(cost[kind]) for cost in costs) + " |")
    return "\n".join(lines)


def bill_table(measured: dict, prices: Prices) -> str:
    """Worker-hours and dollars for each reader and kind of conversion, at each size."""
    lines = ["| pipeline | " + " | ".join(HEADS) + " |", "|---|" + "---:|" * len(HEADS)]
    for reader in READERS:
        for kind, image in images(measured, reader).items():
            lines.append(
                f"| {reader.label}, {kind} | {bill_cells(image, reader, measured, prices)}"
            )
    return "\n".join(lines)


def bill_cells(image: Image, reader: Reader, measured: dict, prices: Prices) -> str:
    """An image's worker-hours and dollars at each size, as a table row's cells."""
    costs = [bill(image, rows, reader, measured, prices) for rows in ROWS]
    return (
        " | ".join(f"{figure(c.worker_hours)} worker-h, ${figure(c.dollars)}" for c in costs) + " |"
    )


def prices_line(prices: Prices) -> str:
    worker = Worker()
    return (
        f"Prices: Dataflow batch workers in {prices.where}, {price(prices.vcpu_hour)} a "
        f"vCPU-hour, {price(prices.memory_gb_hour)} a GB-hour of memory, "
        f"{price(prices.disk_gb_hour)} a GB-hour of standard Persistent Disk, Dataflow Shuffle "
        f"{price(prices.shuffle_gb)} a GB; Cloud Storage {price(prices.class_b_per_1000)} per "
        f"1,000 reads and {price(prices.class_a_per_1000)} per 1,000 writes (list prices, "
        f"used on {prices.when}: {prices.source}). Each {worker.machine} worker "
        f"({worker.vcpus} vCPUs, {worker.memory_gb:g} GB, a {worker.disk_gb:g} GB disk) costs "
        f"${worker.hourly(prices):.4f} an hour."
    )


def markdown(measured: dict, prices: Prices = PRICES) -> str:
    """What docs/costs.md holds between its markers."""
    from archive_bill import archive_table  # it builds on this module's model

    return "\n\n".join(
        [
            per_image_table(measured),
            bill_table(measured, prices),
            archive_table(measured, prices),
            prices_line(prices),
        ]
    )


if __name__ == "__main__":
    print(markdown(load()))
