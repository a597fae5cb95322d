"""The command line as a user meets it, and the promises about what workers import."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BEAM, DATAFLOW, LOOPBACK, command, make_images, published, write_manifest

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.dataset.versions import MARKER

ROOT = Path(__file__).resolve().parents[1]


# A conversion of the good manifest `{m}`, the mistake added after it.
CONVERT = ["convert", "--manifest", "{m}", "--output", "o"]


def _dataflow_without(flag: str) -> list[str]:
    return [given for given in DATAFLOW if not given.startswith(f"--{flag}=")]


def _fail(capsys, *argv):
    status = main(list(argv))
    err = capsys.readouterr().err.strip()
    return status, err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["convert", "--output", "o"], "required: --manifest"),
        (["convert", "--manifest", "nope.csv", "--output", "o"], "no such file"),
        (["convert", "--manifest", "x*.csv", "--output", "o"], "no file matches"),
        ([*CONVERT, "--num_shard", "8"], "--num_shard"),
        ([*CONVERT, "--num_shards", "x"], "--num_shards"),
        ([*CONVERT, "--split", "a=2"], "--split"),
        ([*CONVERT, "--feature", "w:int"], "--feature"),
        ([*CONVERT, *["--feature", "w:int64"] * 2], "twice"),
        ([*CONVERT, "--label_map", "no"], "--label_map"),
        ([*CONVERT, "--max_scans", "0"], "--max_scans"),
        ([*CONVERT, "--validate", "full"], "'full' is no longer a value: it did what 'scans' does"),
        ([*CONVERT, "--max_decode_mb", "0"], "--max_decode"),
        (["convert", "--manifest", "{bad}", "--output", "o"], "missing column"),
        ([*CONVERT, "--processes", "2", *DATAFLOW], "--processes is for local runs"),
        (
            [*CONVERT, "--processes", "2", "--runner=direct"],
            "--processes is for local runs without Beam flags",
        ),
        (["convert", "--manifest", "{m}", "--output", "{m}"], "a file, not a folder"),
        (["convert", "--manifest", "{m}", "--output", "{m}/under/it"], "a file, not a folder"),
        (["convert", "--manifest", "{m}", "--output", ""], "--output is empty"),
        (["convert", "--manifest", "{m}", "--output", " \t"], "--output is empty"),
        ([*CONVERT, "--runner", "nosuch"], "--runner nosuch: not a Beam runner"),
        ([*CONVERT, "--runner", "no.such.Runner"], "No module named 'no'"),
        ([*CONVERT, "--runner", "BundleBasedDirectRunner"], "use --runner DirectRunner"),
        (
            [*CONVERT, *_dataflow_without("project")],
            "--runner DataflowRunner: Missing required option: project",
        ),
        (
            [*CONVERT, *_dataflow_without("region")],
            "--runner DataflowRunner: Missing required option: region",
        ),
        (
            [*CONVERT, *_dataflow_without("temp_location")],
            "--runner DataflowRunner: Missing GCS path option: temp_location",
        ),
        (
            [*CONVERT, *_dataflow_without("temp_location"), "--temp_location=/tmp"],
            "Invalid GCS path (/tmp), given for the option: temp_location",
        ),
        (["frobnicate"], "unknown command"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    good = write_manifest(tmp_path / "m.csv", [{"image_uri": "a.jpg", "label": "x"}])
    bad = tmp_path / "bad.csv"
    bad.write_text("path,label\na.jpg,x\n")
    argv = [a.format(m=good, bad=bad) for a in argv]
    status, err = _fail(capsys, *argv, "--no_progress")
    assert status == 2
    assert len(err.splitlines()) == 1 and err.startswith("tfrecord-pipeline: error:")
    assert message in err


@pytest.mark.parametrize("flag", ["--max_side", "--resize_short_side"])
@pytest.mark.parametrize("value", ["0", "-3"])
def test_a_side_of_no_pixels_is_refused_in_one_line(tmp_path, flag, value):
    """`--resize_short_side 0` was taken and resized nothing, with exit status 0."""
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    done = command("convert", "--manifest", manifest, "--output", tmp_path / "o", flag, value)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == (
        f"tfrecord-pipeline: error: {flag} takes a number of pixels, 1 or more (got {value}); "
        "leave it out not to resize\n"
    )
    assert not (tmp_path / "o").exists()


def test_ctrl_c_is_one_line_and_exit_130(tmp_path, capsys, monkeypatch):
    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr("tfrecord_pipeline.cli.main.convert_prepared", interrupted)
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    status, err = _fail(capsys, "convert", "--manifest", str(manifest), "--output", "o")
    assert (status, err) == (130, "tfrecord-pipeline: interrupted")


def test_successful_run_prints_summary_and_failing_gates_exit_1(tmp_path, capsys):
    rows = make_images(tmp_path, per_class=2)
    manifest = write_manifest(tmp_path / "m.csv", rows)
    out = str(tmp_path / "out")
    assert main(["convert", "--manifest", str(manifest), "--output", out, "--no_progress"]) == 0
    printed = capsys.readouterr().out
    assert "train" in printed and f"version: {published(out)}  (published)" in printed
    rows.append({"image_uri": "gone.jpg", "label": "coffee"})
    write_manifest(tmp_path / "m.csv", rows)
    status = main(["convert", "--manifest", str(manifest), "--output", out, "--no_progress"])
    captured = capsys.readouterr()
    assert status == 1 and "(NOT published)" in captured.out
    assert f"version: {published(out)}  (published)" in printed  # the first one still
    assert "missing_file" in captured.err


def test_a_run_over_the_error_rate_names_its_rejected_files_and_the_rate_that_publishes(
    tmp_path, capsys
):
    """Two bad files of 10: the lines say which, and the --max_error_rate they suggest, given
    to the same command, publishes."""
    rows = make_images(tmp_path, per_class=2)
    (tmp_path / "images" / "empty.jpg").write_bytes(b"")
    (tmp_path / "images" / "cut.jpg").write_bytes(
        (tmp_path / rows[0]["image_uri"]).read_bytes()[:300]
    )
    rows += [{"image_uri": "images/empty.jpg", "label": "coffee"}]
    rows += [{"image_uri": "images/cut.jpg", "label": "coffee"}]
    argv = ["convert", "--manifest", str(write_manifest(tmp_path / "m.csv", rows))]
    argv += ["--output", str(tmp_path / "out"), "--no_progress"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "rerun with --max_error_rate 0.2\n" in err
    (rejected,) = [line for line in err.splitlines() if "rejected: " in line]
    assert "rejected: images/empty.jpg (empty_file: the file is empty); images/cut.jpg " in rejected
    assert "(corrupt_image: " in rejected and rejected.endswith("/errors/")
    assert main([*argv, "--max_error_rate", "0.2"]) == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags",
    [
        ["--runner", "directrunner"],  # once a "dry run" that did nothing
        ["--runner", "FnApiRunner"],
        LOOPBACK,
    ],
    ids=["directrunner", "FnApiRunner", "PortableRunner-embed"],
)
def test_every_local_runner_runs_to_the_end_and_prints_the_summary(tmp_path, capsys, flags):
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    out = tmp_path / "out"
    argv = ["convert", "--manifest", str(manifest), "--output", str(out), "--no_progress"]
    assert main([*argv, "--num_shards", "2", *flags]) == 0
    printed = capsys.readouterr().out
    assert "dry run" not in printed and "Dataflow" not in printed
    version = published(out)
    assert printed.rstrip().endswith(f"version: {version}  (published)")
    assert (version / MARKER).exists() and len(list(version.glob("*.tfrecord"))) == 2


def test_installed_command_has_no_traceback_and_never_imports_tensorflow(tmp_path):
    """Runs real conversions in a fresh interpreter: the local runner loads neither TensorFlow
    nor Beam, and for JPEGs it stores as they are, neither protobuf, Pillow nor libvips
    (start-up time); the Beam pipeline no TensorFlow."""
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    convert = f"['convert', '--manifest', {str(manifest)!r}, '--no_progress', '--output', "
    script = (
        "import sys; from tfrecord_pipeline.cli.main import main; "
        f"assert main({convert}{str(tmp_path / 'local')!r}]) == 0; "
        "assert not any(m.startswith(('tensorflow', 'apache_beam', 'google.protobuf', 'PIL', "
        "'pyvips')) for m in sys.modules); "
        f"assert main({convert}{str(tmp_path / 'beam')!r}, *{BEAM!r}]) == 0; "
        "assert 'apache_beam' in sys.modules; "
        "assert not any(m.startswith('tensorflow') for m in sys.modules), 'TF imported'"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    command = [Path(sys.executable).parent / "tfrecord-pipeline", "convert", "--no_progress"]
    bad = subprocess.run(
        [*command, "--manifest", "nope.csv", "--output", str(tmp_path / "x")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    # The command skips the interpreter's teardown: its piped output must still arrive whole.
    good = subprocess.run(
        [*command, "--manifest", str(manifest), "--output", str(tmp_path / "installed")],
        capture_output=True,
        text=True,
    )
    assert good.returncode == 0, good.stderr
    version = published(tmp_path / "installed")
    assert good.stdout.rstrip().endswith(f"version: {version}  (published)")


def test_generated_proto_code_matches_the_proto(tmp_path):
    """The committed example_pb2.py is what protoc makes of example.proto today, at the path
    it is installed under (the path names the module its message classes say they are from)."""
    pytest.importorskip("grpc_tools")
    installed = Path("tfrecord_pipeline/transforms/tfrecord/proto/example.proto")
    (tmp_path / "in" / installed).parent.mkdir(parents=True)
    shutil.copy(ROOT / "transforms/tfrecord/proto/example.proto", tmp_path / "in" / installed)
    # A subprocess: protoc in the same process as TensorFlow's protobuf crashes.
    protoc = [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path / 'in'}"]
    subprocess.run(
        [*protoc, f"--python_out={tmp_path}", str(installed)], check=True, cwd=tmp_path / "in"
    )
    generated = (tmp_path / installed.with_name("example_pb2.py")).read_text()
    assert generated == (ROOT / "transforms/tfrecord/proto/example_pb2.py").read_text()
