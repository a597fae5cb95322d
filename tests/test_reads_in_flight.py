"""Reads in flight, through the command line: a writer reading `gs://` images keeps as many
reads in flight as `--read_latency_ms` and its CPU per image derive (transforms/write/threads.py)
and no more, held at a gate in front of the GCS emulator."""

import json
import math
import os
import threading

import pytest
from conftest import RGB_SOURCES, command, make_images, write_manifest
from fault_proxy import FaultProxy, object_name

from tfrecord_pipeline.dataset.versions import resolve
from tfrecord_pipeline.transforms.write.threads import (
    PASS_THROUGH_US,
    available_cores,
    reads_per_core,
)

GATE_S = 30  # how long a read waits at the gate for the others before it opens anyway
LATE_S = 1.0  # how long the gate stays shut once full, for any read beyond those expected


class ReadGate(FaultProxy):
    """The fault proxy without faults, holding each read of an image's media under `prefix` until
    `expected` are held at once, and LATE_S more for any beyond them; then every read passes.
    `most`: the most reads it ever held at once, counted until the emulator has answered (the
    reader sends its next one after that); `timed_out`: whether a read waited GATE_S in vain,
    so fewer than `expected` were ever in flight."""

    def __init__(self, emulator_port: int, prefix: str, expected: int):
        super().__init__(emulator_port, prefix)
        self.expected, self.held, self.most, self.timed_out = expected, 0, 0, False
        self._full, self._open = threading.Event(), threading.Event()
        self._count = threading.Lock()

    def _is_read(self, method: str, target: str) -> bool:
        name = object_name(target) or ""
        return method == "GET" and "alt=media" in target and name.startswith(self.prefix)

    def fault_for(self, method: str, target: str, body: bytes | None = None) -> str | None:
        if self._is_read(method, target):
            with self._count:
                self.held += 1
                self.most = max(self.most, self.held)
                if self.held == self.expected and not self._full.is_set():
                    self._full.set()
                    threading.Timer(LATE_S, self._open.set).start()
            if not self._open.wait(GATE_S):
                self.timed_out = True
                self._open.set()
        return super().fault_for(method, target, body)

    def forward(self, method: str, target: str, headers: dict, body: bytes | None):
        answer = super().forward(method, target, headers, body)
        if self._is_read(method, target):
            with self._count:
                self.held -= 1
        return answer


@pytest.mark.slow
@pytest.mark.parametrize("per_core", [2, 5])
def test_a_writer_keeps_the_reads_in_flight_its_latency_flag_derives(tmp_path, gcs, per_core):
    """--read_latency_ms chosen so that ⌈1.25 × (latency + CPU) / CPU⌉ is `per_core`: 0 ms,
    no latency, gives a read working and one waiting; 3 CPU times of latency give 5."""
    latency_ms = (per_core / 1.25 - 1) * PASS_THROUGH_US / 1000
    expected = available_cores() * reads_per_core(latency_ms, PASS_THROUGH_US)
    assert expected == available_cores() * per_core
    source = tmp_path / "src"
    per_class = math.ceil((expected + 8) / len(RGB_SOURCES))
    write_manifest(source / "manifest.csv", make_images(source, per_class=per_class))
    prefix = f"inflight-{tmp_path.name}"
    folder = gcs(source, prefix)
    with ReadGate(gcs.port, f"{prefix}/images/", expected) as gate:
        env = {**os.environ, "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{gate.port}"}
        done = command(
            "convert",
            *("--manifest", f"{folder}/manifest.csv", "--output", tmp_path / "out"),
            *("--num_shards", "1", "--no_progress", "--read_latency_ms", f"{latency_ms:g}"),
            env=env,
        )
    assert done.returncode == 0, done.stderr
    assert not gate.timed_out and gate.most == expected
    # How this machine ran, not what the dataset is: kept out of its metadata.
    info = json.loads(resolve(str(tmp_path / "out")).info_text)
    assert info["records"] == len(RGB_SOURCES) * per_class
    assert "threads" not in info["options"] and "read_latency_ms" not in info["options"]


@pytest.mark.parametrize("latency", ["-1", "1001", "soon"])
def test_a_latency_out_of_range_is_refused_in_one_line(tmp_path, latency):
    """Beyond a second a writer would start thousands of threads a core: a typo, not a store."""
    write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    done = command(
        "convert", "--manifest", tmp_path / "m.csv", "--output", tmp_path / "out",
        "--read_latency_ms", latency,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "--read_latency_ms" in done.stderr and not (tmp_path / "out").exists()
