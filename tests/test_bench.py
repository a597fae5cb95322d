"""The benchmark's own logic, and one tiny sitting of every script so none rots unnoticed.
A sitting whose figures are timings is marked `bench`: `make bench` runs it, `make test` does
not (a test never holds a timing to a value). A sitting that stays in `make test` asserts what
its figures must be: requests counted, bytes, memory bounds."""

import json
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench  # noqa: E402
import measure  # noqa: E402

# docs/costs.md's tables, between these two lines, are generated: the test prints them.
COSTS = re.compile(r"^<!-- costs: generated .*? -->\n(.*?)\n<!-- costs: end -->$", re.M | re.S)


def _sample(seconds, tree_mb, process_mb=100.0):
    return {"seconds": seconds, "peak_rss_tree_mb": tree_mb, "peak_rss_process_mb": process_mb}


def test_a_run_is_its_median_time_and_its_highest_memory():
    summary = bench.summarise([_sample(9.0, 200), _sample(2.0, 210), _sample(3.0, 190)], 60)
    assert summary["seconds"] == 3.0 and summary["images_per_s"] == 20.0
    assert summary["peak_rss_tree_mb"] == 210 and summary["samples_s"] == [9.0, 2.0, 3.0]


def test_a_run_timed_apart_converts_in_its_time_less_its_start_up_of_the_same_round():
    timed = [{**_sample(9.0, 200), "startup_s": 6.0}, {**_sample(4.0, 200), "startup_s": 2.5}]
    timed.append({**_sample(5.0, 200), "startup_s": 1.0})
    summary = bench.summarise(timed, 60)
    assert summary["seconds"] == 5.0 and summary["startup_s"] == 2.5
    assert summary["conversion_s"] == 3.0 and summary[bench.CONVERSION] == 20.0
    assert "conversion_s" not in bench.summarise([_sample(2.0, 210)], 60)


def test_a_rounds_busy_share_is_its_cpu_time_over_every_cores_time():
    cores = os.cpu_count()
    summary = bench.summarise([{**_sample(2.0, 50), "cpu_s": cores * 1.5}, _sample(4.0, 50)], 60)
    assert summary["busy_samples"] == [0.75, None]  # a sample of an older sitting: no CPU


def test_a_runs_cpu_time_counts_the_processes_its_processes_waited_for(tmp_path):
    """The converter's shard writers are its children: their CPU is the run's."""
    report = tmp_path / "grandchild.txt"
    grandchild = (
        "import time\n"
        "end = time.process_time() + 0.3\n"
        "while time.process_time() < end: pass\n"
        f"open({str(report)!r}, 'w').write(str(time.process_time()))"
    )
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    measured = measure.run_measured([sys.executable, "-c", child])
    assert measured["cpu_s"] >= float(report.read_text())


def test_a_ratio_of_two_runs_is_the_median_of_their_rounds_ratios():
    # A slow spell in the second round slows both runs of its pair: its ratio stands, where
    # the runs' medians (3.0 s against 2.0 s) would set one spell against another.
    ours = [_sample(s, 50) for s in (2.4, 9.0, 3.0)]
    floor = [_sample(s, 50) for s in (2.0, 7.2, 1.0)]
    results = {"ours": bench.summarise(ours, 60), "floor": bench.summarise(floor, 60)}
    assert bench.ratio(results, bench.Target("ours / floor", "ours", "floor", 0.85)) == 0.8
    for sample, startup in zip(ours + floor, (0.4, 1.0, 1.0, 0.0, 0.0, 0.0), strict=True):
        sample["startup_s"] = startup
    results = {"ours": bench.summarise(ours, 60), "floor": bench.summarise(floor, 60)}
    rate = bench.Target("ours / floor", "ours", "floor", 1.0, bench.CONVERSION)
    assert bench.ratio(results, rate) == 0.9  # 2.0/2.0, 7.2/8.0, 1.0/2.0


def test_a_lit_data_or_mds_output_counts_the_samples_its_index_lists(tmp_path):
    index = {"shards": [{"samples": 3}, {"samples": 4}], "version": 2}
    (tmp_path / "index.json").write_text(json.dumps(index))
    assert bench.samples("shards", "samples")(tmp_path) == 7


def test_bench_runs_names_the_runs_a_sitting_makes(tmp_path, monkeypatch):
    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    monkeypatch.setenv("BENCH_RUNS", "1 copy floor")
    report = bench.run_all(4, repeats=1)
    assert list(report["runs"]) == ["1 copy floor"] and report["ratios"] == []


def test_the_readme_table_lists_every_run_ratio_and_memory_target():
    def report(images, converter_mb):
        runs = {name: bench.summarise([_sample(2.0, 50)], images) for name in bench.RUNS}
        runs["6 converter"] = bench.summarise([_sample(2.0, converter_mb, 240)], images)
        ratios = [
            {"ratio": target.label, "value": 1.0, "target": target.target}
            for target in bench.TARGETS
        ]
        return {"images": images, "runs": runs, "ratios": ratios}

    table = bench.markdown_table([report(2000, 200), report(20000, 230)])
    assert all(f"| {name} |" in table for name in bench.RUNS)
    assert all(target.label in table for target in bench.TARGETS)
    assert "20,000 vs 2,000 images: 1.15x (target ≤ 1.2x)" in table
    assert "largest single process: 240 MB" in table


def test_the_table_marks_a_skipped_run_and_a_run_an_older_sitting_did_not_have():
    def report(images, runs):
        return {
            "images": images,
            "runs": {"6 converter": bench.summarise([_sample(2.0, 50)], images), **runs},
            "ratios": [{"ratio": "converter / Ray Data", "value": None, "target": 1.0}],
        }

    older = report(2000, {})
    newer = report(20000, {"9 Ray Data": {"skipped": "no Ray here"}})
    table = bench.markdown_table([older, newer])
    assert "| 9 Ray Data | — | skipped | — | skipped |" in table
    assert "| converter / Ray Data | — | — | ≥ 1.0 |" in table


def test_a_run_that_writes_fewer_records_than_images_stops_the_sitting(tmp_path):
    """The records are read back from the files the run wrote, not taken from its word."""
    from tfrecord_pipeline.transforms.tfrecord.records import frame

    write = "import pathlib, sys; out = pathlib.Path(sys.argv[1]); out.mkdir(); "
    write += "(out / 'a.tfrecord').write_bytes(bytes.fromhex(sys.argv[2]) * int(sys.argv[3]))"
    record = frame(b"an example").hex()

    def writes(records: int) -> bench.Run:
        command = [sys.executable, "-c", write]
        return bench.Run(lambda m, o: [*command, o, record, str(records)], bench.tfrecords("*"))

    assert bench.measure(writes(3), "manifest.csv", 3)["seconds"] > 0
    with pytest.raises(RuntimeError, match="2 records of 3 images"):
        bench.measure(writes(2), "manifest.csv", 3)


def test_a_run_whose_interpreter_is_missing_is_reported_as_skipped_with_the_reason(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    runs = {"copy": bench.peer("copy"), "gone": bench.peer("copy", python=tmp_path / "python")}
    monkeypatch.setattr(bench, "RUNS", runs)
    monkeypatch.setattr(bench, "TARGETS", (bench.Target("copy / gone", "copy", "gone", 1.0),))
    report = bench.run_all(4, repeats=1)
    assert report["runs"]["copy"]["images_per_s"] > 0
    reason = f"{tmp_path / 'python'} is missing (`make bench-peers` makes it)"
    assert report["runs"]["gone"] == {"skipped": reason}
    assert report["ratios"] == [{"ratio": "copy / gone", "value": None, "target": 1.0}]


@pytest.mark.bench
@pytest.mark.slow
def test_one_tiny_sitting_runs_every_peer_and_converter(tmp_path, monkeypatch):
    """Every run, the peers users pick (a TFDS builder, Ray Data, LitData, MDS) among them,
    writes one record an image (bench.measure reads them back). Ray, LitData and MDS run only
    where `make bench-peers` made their environment: the suite never installs them."""
    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    report = bench.run_all(12, repeats=1)
    assert set(report["runs"]) == set(bench.RUNS)
    ran = {name: run for name, run in report["runs"].items() if "skipped" not in run}
    assert set(bench.RUNS) - set(ran) <= {"9 Ray Data", "9 LitData", "9 MDS"}  # no .venv-peers
    assert all(run["images_per_s"] > 0 and run["peak_rss_tree_mb"] > 0 for run in ran.values())
    timed_apart = {name for name, run in bench.RUNS.items() if run.startup} & set(ran)
    assert {"6 converter", "6 markers", "9 TFDS builder"} <= timed_apart
    assert all(ran[name]["startup_s"] > 0 for name in timed_apart)
    assert [ratio["ratio"] for ratio in report["ratios"]] == [t.label for t in bench.TARGETS]


@pytest.mark.bench
def test_one_tiny_refresh_sitting_measures_every_run(tmp_path, monkeypatch):
    import refresh

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    report = refresh.main(100, 1, [])
    assert report["full_s"] > 0 and report["refresh_s"] > 0 and report["refresh_over_full"] > 0
    assert report["floor_s"] > 0 and report["floor_over_full"] > 0 and report["check_s"] > 0


@pytest.mark.bench
def test_one_tiny_carry_costs_sitting_times_every_way(tmp_path, monkeypatch):
    import carry_costs

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    report = carry_costs.main(100, 1)
    assert set(report["median_s"]) == set(carry_costs.WAYS) and report["shard_bytes"] > 0


def test_one_tiny_commit_memory_sitting_runs_the_commit_step_alone():
    import commit_memory

    report = commit_memory.main([10, 100])
    assert [(run["errors"], run["records"]) for run in report["runs"]] == [(10, 40), (100, 40)]
    assert all(run["peak_rss_mb"] >= run["imports_rss_mb"] > 0 for run in report["runs"])
    # The commit step is given counts, not rows: ten times the rejected rows, memory and inputs
    # flat (the script's target, kept at any size: benchmarks/results/commit-memory.json).
    assert report["peak_rss_ratio"] <= commit_memory.TARGET
    assert report["inputs_bytes_ratio"] <= commit_memory.TARGET


@pytest.mark.bench
def test_one_tiny_dataflow_costs_sitting_measures_every_stage(tmp_path, monkeypatch):
    import dataflow_costs

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    report = dataflow_costs.main(30, rounds=2)
    measured = report["measured"]
    assert all(us > 0 for us in measured["cpu_us_per_row"].values())
    assert all(us > 0 for us in measured["cpu_us_per_image"].values())
    assert measured["shuffle_bytes_per_row"] > 0


def test_one_tiny_read_requests_sitting_counts_every_reader_s_requests(tmp_path, monkeypatch):
    import read_requests

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    report = read_requests.main(8, readers=("converter", "gcs"))
    # One GET an image, whichever reader (start-up requests cancel out between the two runs).
    assert report["requests_per_object"] == {"converter": 1.0, "gcs": 1.0}


def test_the_costs_page_holds_what_the_bill_prints_from_the_committed_results():
    import dataflow_bill

    page = (ROOT / "docs" / "costs.md").read_text()
    written = COSTS.search(page)
    expected = dataflow_bill.markdown(dataflow_bill.load())
    paste = f"docs/costs.md's tables should be (paste them between the markers):\n{expected}"
    assert written and written[1] == expected, paste


def test_a_reader_with_one_read_in_flight_holds_its_vcpu_through_every_wait():
    import dataflow_bill

    waits = 3 * dataflow_bill.LATENCY_MS * 1000
    one = dataflow_bill.Image(read_us=900, write_us=100, requests=3, in_flight=1)
    assert one.vcpu_us == 1000 + waits
    enough = one._replace(in_flight=dataflow_bill.reads_needed(one.cpu_us, 3))
    assert enough.vcpu_us == 1000
    assert enough._replace(in_flight=enough.in_flight - 1).vcpu_us > 1000


def test_the_bill_is_worker_time_shuffle_and_requests_at_the_list_prices():
    import dataflow_bill

    measured = dataflow_bill.load()
    reader = dataflow_bill.READERS[0]
    image = dataflow_bill.images(measured, reader)["pass-through"]
    free = dataflow_bill.Prices(0, 0, 0, 0, 0, 0)
    assert dataflow_bill.bill(image, 10**6, reader, measured, free).dollars == 0
    requests_only = free._replace(class_b_per_1000=1.0)
    billed = dataflow_bill.bill(image, 10**6, reader, measured, requests_only).dollars
    assert billed == 10**6 * image.requests / 1000
    small, large = (dataflow_bill.bill(image, rows, reader, measured, free) for rows in (1, 10))
    assert large.worker_hours == pytest.approx(10 * small.worker_hours)


@pytest.mark.bench
def test_one_tiny_image_costs_sitting_times_every_stage(tmp_path, monkeypatch):
    import image_costs

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    rounds = image_costs.measure(12)
    costs = image_costs.medians(rounds)
    assert len(costs) == 15 and all(us > 0 for us in costs.values())
    table = image_costs.markdown(rounds)
    assert all(f"| {stage} |" in table for stage in costs)
    assert all(f"| {label} | " in table for label, *_ in image_costs.RATIOS)


def test_a_cost_ratio_is_the_median_of_its_rounds_ratios():
    import image_costs

    stages = {stage: 1.0 for _, loop, ours, _ in image_costs.RATIOS for stage in (loop, ours)}
    label, loop, ours, _ = image_costs.RATIOS[0]
    # A slow spell in the second round slows both stages of its pair: its ratio stands.
    pairs = [(200.0, 100.0), (600.0, 300.0), (110.0, 100.0)]
    rounds = [{**stages, loop: a, ours: b} for a, b in pairs]
    assert image_costs.ratios(rounds)[label] == 2.0


@pytest.mark.bench
@pytest.mark.slow
def test_one_tiny_manifest_scale_sitting_measures_the_launcher_and_the_read_step(
    tmp_path, monkeypatch
):
    import manifest_scale

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    report = manifest_scale.main([100, 1000])
    assert [size["rows"] for size in report["sizes"]] == [100, 1000]
    for size in report["sizes"]:
        assert size["launcher"]["peak_rss_process_mb"] > 0
        assert size["read_step"]["peak_rss_process_mb"] > 0
    assert report["launcher_ratio"] > 0 and report["read_step_ratio"] > 0


@pytest.mark.bench
def test_one_tiny_writer_cpu_sitting_measures_every_engine(tmp_path, monkeypatch):
    """Every engine converts both sizes, every image (the script checks the records)."""
    import writer_cpu

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    report = writer_cpu.main(10, 1)
    assert report["sizes"] == {"small": 2, "large": 10}
    assert set(report["engines"]) == set(writer_cpu.ENGINES)
    for engine in report["engines"].values():
        (run,) = engine["samples"]
        assert run["small"]["cpu_s"] > 0 and run["large"]["cpu_s"] > 0
    assert set(report["local_over_beam"]) == set(writer_cpu.ENGINES) - {"local"}


@pytest.mark.bench
def test_one_tiny_error_memory_sitting_measures_every_case_and_its_floor():
    import error_memory

    report = error_memory.main([50], rounds=1)
    runs = report["runs"]
    assert [(run["case"], run["processes"]) for run in runs] == [
        (case, processes) for case in error_memory.CASES for processes in error_memory.PROCESSES
    ]
    assert all(run["errors"] == 49 and run["peak_rss_tree_mb"] > 0 for run in runs)
    assert all(run["rows_floor_mb"] > 0 for run in runs)
    assert "| 50 | duplicate_content | --processes 1 |" in error_memory.markdown(report)


@pytest.mark.bench
def test_one_tiny_gcs_read_cost_sitting_reads_every_object_with_each_reader(tmp_path, monkeypatch):
    """Each reader's child reads every object (it fails the run otherwise). Beam's gcsio is left
    out: without credentials its discovery backs off for ~20 s before it connects anonymously."""
    import gcs_read_cost

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    readers = ("convert-local", "converter", "floor", "floor_checked", "gcs")
    report = gcs_read_cost.main(8, 1, readers)
    assert report["sizes"] == {"small": 2, "large": 8}
    assert tuple(report["readers"]) == readers
    for reader in report["readers"].values():
        (run,) = reader["samples"]
        assert run["small"]["cpu_s"] > 0 and run["large"]["cpu_s"] > 0
    assert all(f"| {name} |" in gcs_read_cost.markdown(report) for name in readers)
    # The conversion's verdict against the checked floor (none when a tiny floor measures 0).
    assert all("convert-local" in line for line in gcs_read_cost.verdicts(report))


def test_gs_ratios_pair_each_round_with_the_floors_round():
    """A slow round slows the floor beside the reader; a round whose floor a tiny run measured
    at 0 or below has no ratio; no round of the floor, none at all."""
    import gcs_read_cost

    def runs(*us):
        return [{"us_per_object": value} for value in us]

    reader, floor = runs(600.0, 1500.0, 640.0), runs(500.0, 1000.0, 400.0)
    assert gcs_read_cost.paired_ratio(reader, floor) == 1.5  # 1.2, 1.5, 1.6
    assert gcs_read_cost.paired_ratio(reader, runs(500.0, -200.0, 0.0)) == 1.2
    assert gcs_read_cost.paired_ratio(reader, []) is None


@pytest.mark.bench
def test_a_gcs_read_cost_sitting_of_some_runs_reports_them_without_the_floors(
    tmp_path, monkeypatch
):
    """Some of the runs (here the converter's read alone): no floor was run, so no ratio."""
    import gcs_read_cost

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    report = gcs_read_cost.main(8, 1, ("converter",))
    (reader,) = report["readers"].values()
    assert reader["over_floor"] is None and reader["over_floor_checked"] is None
    assert "| converter |" in gcs_read_cost.markdown(report)


@pytest.mark.bench
@pytest.mark.slow
def test_one_tiny_reads_in_flight_sitting_reads_every_image_through_the_latency_store(
    tmp_path, monkeypatch
):
    """Every case converts both sizes, every image (the script checks the records), each image
    read in one request, answered from the latency store's memory."""
    import reads_in_flight

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    affinity = os.sched_getaffinity(0)
    report = reads_in_flight.main(8, 1)
    assert os.sched_getaffinity(0) == affinity  # given back to this process
    assert report["sizes"] == [2, 8] and set(report["cases"]) == set(reads_in_flight.CASES)
    conversions = sum(len(delays) for _, delays, _ in reads_in_flight.CASES.values())
    assert report["store_requests"]["media"] == conversions * (2 + 8)
    for name, case in report["cases"].items():
        for delay in reads_in_flight.CASES[name][1]:
            (run,) = case[f"{delay:g}_ms"]["samples"]
            assert all(size["cpu_s"] > 0 for size in run["runs"].values())
        assert case["threads"] > 0
    assert all(f"| {name} |" in reads_in_flight.markdown(report) for name in report["cases"])


@pytest.mark.bench
def test_one_tiny_gcs_request_cost_sitting_sends_every_kind_of_request_both_ways():
    """Each kind's child sends its requests (it fails the run otherwise), the project's way and
    pyarrow's."""
    import gcs_request_cost

    kinds = tuple(gcs_request_cost.KINDS)
    report = gcs_request_cost.main(8, 1, kinds)
    assert tuple(report["kinds"]) == kinds
    for kind in report["kinds"].values():
        for way in gcs_request_cost.WAYS:
            (run,) = kind["samples"][way]
            assert run["small"]["cpu_s"] > 0 and run["large"]["cpu_s"] > 0
    table = gcs_request_cost.markdown(report)
    assert all(f"| {kind} (per " in table for kind in kinds)


@pytest.mark.bench
@pytest.mark.slow
def test_one_tiny_random_access_sitting_reads_every_record_with_every_reader(tmp_path, monkeypatch):
    """Each reader's process reads every record of the split once (its sum of bytes is the
    same whichever reader, format and order), and both formats' conversions are timed."""
    import random_access

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    report = random_access.main([12], 1)
    readers = (*random_access.READERS, "tf.data")
    rows = report["rows"]
    assert [(row["reader"], row["threads"]) for row in rows] == [
        (reader, threads) for reader in readers for threads in random_access.THREADS
    ]
    assert len({(row["records"], row["bytes"]) for row in rows}) == 1 and rows[0]["records"] == 12
    assert all(row["peak_rss_mb"] >= row["rss_before_reads_mb"] > 0 for row in rows)
    assert all(f"| {reader} |" in random_access.markdown(report) for reader in readers)
    conversion = report["conversion"]
    assert conversion["images"] == 12 and set(conversion["seconds"]) == set(random_access.FORMATS)
    assert conversion["array_record_over_tfrecord"] > 0


@pytest.mark.bench
def test_one_tiny_many_rows_sitting_measures_every_run(tmp_path, monkeypatch):
    import many_rows

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    report = many_rows.main([20, 40], 1)
    runs = [*many_rows.RUNS, *many_rows.MEETING]
    assert set(report["runs"]) == {f"{run}, {n}" for run in runs for n in (20, 40)}
    assert all(
        run["images_per_s"] > 0 and run["peak_rss_mb"] > 0 for run in report["runs"].values()
    )
    assert set(report["rss_ratio"]) == {"every core", *many_rows.MEETING}
    assert all(ratio > 0 for ratio in report["rss_ratio"].values())
    assert set(report["speedup"]) == {20, 40}


@pytest.mark.bench
def test_one_tiny_archives_sitting_measures_every_run_and_both_tars_memory(tmp_path, monkeypatch):
    """Every run writes one record an image (the script reads them back); the Hugging Face peer
    runs only where `make bench-peers` made .venv-peers, and says why it did not."""
    import archives

    monkeypatch.setenv("CORPUS_DIR", str(tmp_path))
    report = archives.main(12, 1, small_mb=0.2, big_mb=0.6)
    runs = report["runs"]
    ran = {name: run for name, run in runs.items() if "skipped" not in run}
    assert set(runs) - set(ran) <= {archives.HF}
    assert all(run["images_per_s"] > 0 and run["cpu_us_per_image"] > 0 for run in ran.values())
    assert all("skipped: not installed" in runs[name]["skipped"] for name in set(runs) - set(ran))
    assert report["ratios"]["CPU per image, one tar / loose files"] > 0
    memory = report["memory"]
    assert memory["big"]["images"] > memory["small"]["images"] == memory["floor"]["images"] > 0
    assert memory["big_over_small"] > 0 and memory["big_over_floor"] > 0


def test_one_tiny_archive_requests_sitting_counts_the_listing_and_each_member_s_read():
    """A folder of tars on gs://: the listing streams each tar once (bytes about its size, a
    WebDataset sample's .cls read as it passes); mixed, each image is then read with a ranged
    GET of its own; kept in order, the tars are not read again (the runs read the listing's
    staged copy)."""
    import archive_requests

    report = archive_requests.main(12)
    tars = {name: counts for name, counts in report["layouts"].items() if "loose" not in name}
    for name, counts in tars.items():
        assert 1.0 <= counts["listing"]["bytes_over_archives"] < 1.01, name
        kept = name.endswith("kept in order")
        assert counts["member_reads"]["gets"] == (0 if kept else 12), name
        assert counts["whole_run"]["bytes_over_archives"] < (1.01 if kept else 2.0), name
    assert len({counts["listing"]["gets"] for counts in tars.values()}) == 1  # labels: free
    loose = report["layouts"]["loose objects, class folders"]
    assert loose["member_reads"]["gets"] == 12 and loose["whole_run"]["cpu_us_per_image"] > 0
    assert "| WebDataset shards, kept in order | whole run |" in archive_requests.markdown(report)


def test_the_sitting_holds_each_ratio_from_the_file_its_script_wrote(tmp_path, monkeypatch):
    import sitting

    monkeypatch.setattr(sitting, "RESULTS", tmp_path)
    ratios = {"resize: writer / Pillow loop": 1.17, "resize: writer / turbo + OpenCV area": 0.9}
    (tmp_path / "image-costs.json").write_text(json.dumps({"ratios": ratios}))
    bench_ratios = [
        {"ratio": "converter / checked floor", "value": 0.86, "target": 0.85},
        {"ratio": "converter / kept floor", "value": 0.91, "target": None},
        {"ratio": "markers conversion / MDS conversion", "value": None, "target": 1.0},
    ]
    (tmp_path / "bench-20000.json").write_text(json.dumps({"ratios": bench_ratios}))
    readers = {
        "convert-defaults": {"us_per_object": 900.0, "over_floor_checked": 1.5},
        "floor_checked": {"us_per_object": 600.0, "over_floor_checked": 1.0},
    }
    gcs = tmp_path / f"gcs-read-cost-{sitting.GCS_OBJECTS}-partial.json"
    gcs.write_text(json.dumps({"readers": readers}))
    rows = {
        line.split(" | ")[1] + " " + line.split(" | ")[2]: line
        for line in sitting.summary().splitlines()[2:]
    }
    assert "| 1.17 | ≥ 1.1 |" in rows["resize: writer / Pillow loop image-costs.json"]
    assert (
        "| 0.90 (missed) | ≥ 0.95 |"
        in rows["resize: writer / turbo + OpenCV area image-costs.json"]
    )
    assert "| 0.86 | ≥ 0.85 |" in rows["converter / checked floor bench-20000.json"]
    assert "| not run |" in rows["converter / checked floor subset-200000.json"]
    assert "| 0.91 | — |" in rows["converter / kept floor bench-20000.json"]
    assert "| not run |" in rows["markers conversion / MDS conversion bench-20000.json"]
    gs = f"gs:// convert-defaults / checked floor {gcs.name}"
    assert "| 1.50 | ≤ 1.5 |" in rows[gs]
    assert "| not run |" in rows[gs.replace("defaults", "local")]


def test_every_run_counts_its_records_with_a_function_or_not_at_all():
    # A pattern given where a counter belongs stopped a 20,000-image sitting at its first
    # checked floor run, after a quarter of an hour.
    for name, run in bench.RUNS.items():
        assert run.records is None or callable(run.records), name
        assert callable(run.command), name
