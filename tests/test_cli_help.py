"""The command line explains itself: its version, `convert --help` on one screen, every flag by
group in `--help-all` and the docs' table, "did you mean" for a mistyped flag, and one line, exit
status 2, for missing Google credentials and for a folder or file that is not there. Each is run
as a user runs it, in a process of its own."""

import os
import re

import pytest
from conftest import BEAM, arguments, command, make_images, write_manifest

from tfrecord_pipeline.cli.help import markdown_table
from tfrecord_pipeline.config.arguments import closest, parse_args
from tfrecord_pipeline.config.flags import FLAGS, in_group
from tfrecord_pipeline.config.option import GROUPS, help_text
from tfrecord_pipeline.version import __version__

WIDE = {**os.environ, "COLUMNS": "100"}  # a terminal of 100 columns
LOGIN = "gcloud auth application-default login"


def _one_line_error(done, status: int = 2) -> str:
    """The one line a refused command printed, checked to be one line of that status."""
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfrecord-pipeline: error: "), done.stderr
    return lines[0].removeprefix("tfrecord-pipeline: error: ")


def test_version_is_the_package_s():
    done = command("--version")
    assert (done.returncode, done.stdout) == (0, f"tfrecord-pipeline {__version__}\n")
    assert __version__ == "0.1.0"


def test_the_overview_lists_each_command_with_a_line():
    done = command("--help")
    assert done.returncode == 0
    for name in ("convert", "verify", "preview", "stats", "rollback"):
        assert re.search(rf"^  {name} +\w", done.stdout, re.MULTILINE), name
    assert "tfrecord-pipeline --version" in done.stdout


def test_convert_help_is_one_screen_for_a_newcomer():
    """24 lines of 80 columns, a terminal's first screen (it was 47 lines of 98): what a
    manifest holds, two examples, the flags a first run and a refresh need."""
    done = command("convert", "--help", env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 0
    lines = done.stdout.rstrip("\n").splitlines()
    assert len(lines) <= 24 and max(map(len, lines)) <= 80
    text = done.stdout
    for column in ("image_uri", "url", "label", "split", "key", "objects"):
        assert re.search(rf"\b{column}\b", text), column
    assert "ROOT/<label>/<image>" in text and "ROOT/<split>/<label>/<image>" in text
    assert "COCO" in text
    examples = [line for line in lines if line.startswith("  tfrecord-pipeline convert ")]
    assert len(examples) == 2
    assert "gs://" in examples[1] and "DataflowRunner" in text
    briefed = [flag.name for flag in FLAGS if flag.brief]
    for name in ("--manifest", "--output", "--split", "--num_shards", "--incremental"):
        assert name in briefed
    assert "--keep_versions" in briefed and "--validate" not in briefed  # under --help-all
    for flag in FLAGS:
        # Its synopsis and its brief apart, however long the synopsis (`--file_format
        # tfrecord|array_record` ran into its brief).
        shown = re.search(rf"^  {flag.name}\b(?:.*\S)? {{2,}}(.*)$", text, re.MULTILINE)
        assert bool(shown) == bool(flag.brief), flag.name
        assert not shown or shown[1].startswith(flag.brief), flag.name
    assert "every flag, by group: tfrecord-pipeline convert --help-all" in text


def test_help_all_gives_every_flag_its_group_meaning_and_default():
    done = command("convert", "--help-all", env=WIDE)
    assert done.returncode == 0
    sections = re.split(rf"^({'|'.join(GROUPS)}):$", done.stdout, flags=re.MULTILINE)
    assert sections[1::2] == list(GROUPS)  # each group once, in order
    for group, section in zip(GROUPS, sections[2::2], strict=True):
        printed = " ".join(section.split())  # unwrapped
        for flag in in_group(group):
            meaning = " ".join(help_text(flag).replace("%%", "%").split())
            assert f"{flag.name} " in printed and meaning in printed, flag.name
    assert "Beam pipeline flags: any flag not listed above is Beam's" in done.stdout


def test_every_flag_is_in_a_group():
    assert {flag.group for flag in FLAGS} == set(GROUPS)
    assert [flag.group for flag in FLAGS] == sorted(
        (flag.group for flag in FLAGS), key=list(GROUPS).index
    )


def test_the_options_page_is_a_table_per_group():
    page = markdown_table()
    headings = re.findall(r"^### (\w+)$", page, re.MULTILINE)
    assert headings == [group.capitalize() for group in GROUPS]
    sections = re.split(r"^### \w+$", page, flags=re.MULTILINE)[1:]
    for group, section in zip(GROUPS, sections, strict=True):
        rows = re.findall(r"^\| <code>(--\w+)", section, re.MULTILINE)
        assert rows == [flag.name for flag in in_group(group)]


@pytest.mark.parametrize(
    "mistyped, meant",
    [
        ("--num-shards", "--num_shards"),
        ("--num_shard", "--num_shards"),
        ("--ouput", "--output"),
        ("--Max-Error-Rate", "--max_error_rate"),
        ("--temp-location", "--temp_location"),  # Beam's
    ],
)
def test_a_mistyped_flag_is_refused_with_the_flag_meant(tmp_path, mistyped, meant):
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    convert = ["convert", "--manifest", manifest, "--output", tmp_path / "out"]
    done = command(*convert, f"{mistyped}=2")
    assert _one_line_error(done) == f"unknown flag {mistyped}: did you mean {meant}?"
    assert not (tmp_path / "out").exists()


def test_a_mistyped_required_flag_and_a_beam_flag_without_its_value_are_one_line(tmp_path):
    done = command("convert", "--manifest", "m.csv", "--ouput", tmp_path / "out")
    assert _one_line_error(done) == "unknown flag --ouput: did you mean --output?"
    done = command("convert", "--manifest", "m.csv", "--runner", "DirectRunner")
    assert _one_line_error(done) == "the following arguments are required: --output"
    done = command("convert", "--manifest", "m.csv", "--output", "o", "--runner")
    assert _one_line_error(done) == "argument --runner: expected one argument"


@pytest.mark.parametrize(
    "argv, says",
    [
        ("convert --manifest m.csv -o out", "unknown flag -o: did you mean --output?"),
        ("convert --manifest m.csv --out out", "unknown flag --out: did you mean --output?"),
        (
            "convert --manifest m.csv --output_dir out",
            "unknown flag --output_dir: did you mean --output?",
        ),
        (
            "convert --manifest m.csv --output out --version",
            "unknown flag --version: the version is 'tfrecord-pipeline --version'",
        ),
        (
            "verify {root} --version",
            "unknown flag --version: the version is 'tfrecord-pipeline --version'",
        ),
        ("verify --help-all", "unknown flag --help-all: did you mean --help?"),
        ("verify {root} --decode-mode all", "unknown flag --decode-mode: did you mean --decode?"),
        (
            "preview {root} --out s.png --per-class 2",
            "unknown flag --per-class: did you mean --per_class?",
        ),
        ("stats {root} --output r.html", "unknown flag --output: did you mean --out?"),
        (
            "stats {root} -o r.html --frobnicate",
            "unknown flag --frobnicate: every flag: tfrecord-pipeline stats --help",
        ),
        ("rollback {root} -to 1", "unknown flag -to: did you mean --to?"),
        (
            "verify {root} extra",
            "unexpected argument 'extra'; its flags: tfrecord-pipeline verify --help",
        ),
    ],
)
def test_every_command_says_the_flag_a_mistyped_one_was_meant_to_be(tmp_path, argv, says):
    """A flag a command does not know is said first: before, `-o` read as a missing --output,
    `--help-all` on verify as a missing dataset, and the read commands suggested nothing."""
    done = command(*arguments(argv, root=tmp_path), cwd=tmp_path)
    assert _one_line_error(done) == says
    assert list(tmp_path.iterdir()) == []


def test_a_flag_nobody_knows_is_refused_and_beam_s_flags_pass():
    assert closest("--frobnicate", [flag.name for flag in FLAGS], ["--runner"]) is None
    done = command("convert", "--manifest", "m.csv", "--output", "o", "--frobnicate")
    says = "unknown flag --frobnicate: every flag: tfrecord-pipeline convert --help-all"
    assert _one_line_error(done) == says
    beam = [
        *("--runner", "PortableRunner", "--job_endpoint", "embed", "--project", "p"),
        *("--temp_location", "gs://b/tmp", "--dry_run=True", "--no_auth"),
    ]
    assert parse_args(["--manifest", "m.csv", "--output", "o", *beam])[1] == beam


@pytest.fixture
def no_credentials(tmp_path) -> dict:
    """An environment with no Google credentials anywhere: an empty home, no key file named,
    no emulator, and metadata lookups sent to a closed loopback port (conftest.py)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "NO_GCE_CHECK": "true"}
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST", "CLOUDSDK_CONFIG"):
        env.pop(name, None)
    env["GCE_METADATA_HOST"] = env["GCE_METADATA_IP"] = "127.0.0.1:9"
    return env


@pytest.mark.parametrize(
    "argv",
    [
        ["convert", "--manifest", "{m}", "--output", "gs://tfrp-none/out", "--no_progress"],
        ["convert", "--manifest", "gs://tfrp-none/m.csv", "--output", "{tmp}/o", "--no_progress"],
        ["verify", "gs://tfrp-none/dataset"],
    ],
    ids=["output", "manifest", "verify"],
)
def test_missing_google_credentials_are_one_line(tmp_path, no_credentials, argv):
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    argv = [arg.format(m=manifest, tmp=tmp_path) for arg in argv]
    said = _one_line_error(command(*argv, env=no_credentials))
    assert LOGIN in said and "GOOGLE_APPLICATION_CREDENTIALS" in said
    key = tmp_path / "no-such-key.json"
    no_credentials["GOOGLE_APPLICATION_CREDENTIALS"] = str(key)
    said = _one_line_error(command("verify", "gs://tfrp-none/dataset", env=no_credentials))
    assert said.startswith(f"GOOGLE_APPLICATION_CREDENTIALS names {key}, which is not a file")
    assert LOGIN in said


@pytest.mark.parametrize("runner", [[], BEAM], ids=["local", "beam"])
def test_gs_images_without_credentials_are_one_line(tmp_path, no_credentials, runner):
    """The images' own requests (transforms/storage/connection.py) look for credentials too."""
    rows = [{"image_uri": f"gs://tfrp-none/{n}.jpg", "label": "a"} for n in range(3)]
    manifest = write_manifest(tmp_path / "m.csv", rows)
    argv = ["convert", "--manifest", manifest, "--output", tmp_path / "o", "--no_progress"]
    said = _one_line_error(command(*argv, *runner, env=no_credentials, timeout=150))
    assert said.startswith("no Google Cloud credentials") and LOGIN in said


@pytest.mark.parametrize(
    "argv",
    [
        ["convert", "--manifest", "gs://tfrp-none/*.csv", "--output", "{tmp}/o", "--no_progress"],
        ["preview", "{tmp}/d", "-o", "gs://tfrp-none/sheet.png"],
        ["stats", "{tmp}/d", "-o", "gs://tfrp-none/report.html"],
    ],
    ids=["manifest-glob", "preview-out", "stats-out"],
)
def test_gs_paths_beam_reaches_want_credentials_first(tmp_path, no_credentials, argv):
    """A glob, or a file written, on gs:// is the project's client's, which looks for the
    credentials before its first request (transforms/storage/connection.py) rather than
    carrying on anonymously, as Beam's gcsio would, retrying for minutes."""
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    assert command("convert", "--manifest", manifest, "--output", tmp_path / "d").returncode == 0
    done = command(*[arg.format(tmp=tmp_path) for arg in argv], env=no_credentials, timeout=150)
    said = _one_line_error(done)
    assert said.startswith("no Google Cloud credentials") and LOGIN in said


def test_a_folder_or_file_that_is_not_there_is_said_so(tmp_path):
    (tmp_path / "photos").mkdir()
    missing = {
        ("--manifest", "nosuchdir/"): "--manifest: no such folder: nosuchdir",
        ("--manifest", tmp_path / "photoss"): f"--manifest: no such folder: {tmp_path}/photoss",
        ("--manifest", tmp_path / "fotos/m.csv"): f"--manifest: no such folder: {tmp_path}/fotos",
        (
            "--manifest",
            tmp_path / "photos/m.csv",
        ): f"--manifest: no such file: {tmp_path}/photos/m.csv",
    }
    for given, says in missing.items():
        assert _one_line_error(command("convert", *given, "--output", tmp_path / "o")) == says
    done = command("convert", "--manifest", "", "--output", tmp_path / "o")  # an unset variable
    assert _one_line_error(done) == "--manifest is empty; name a manifest file or class-folder root"
    for argv in (["verify"], ["preview", "-o", tmp_path / "s.png"], ["stats", "-o", "r.html"]):
        done = command(*argv, tmp_path / "datasets/flowers")
        assert _one_line_error(done) == f"no such folder: {tmp_path}/datasets"
