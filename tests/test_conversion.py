"""Options are checked once a run, and the runner decided once, whichever way the run starts:
the command line, `run(argv)` or `convert(ConvertOptions(...))`, on either runner."""

import pytest
from conftest import BEAM, arguments, make_images, write_manifest

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.config import runner_choice
from tfrecord_pipeline.config.conversion import prepare
from tfrecord_pipeline.config.options import ConvertOptions
from tfrecord_pipeline.runners.convert import convert, run
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.write.formats import ShardFormat

# What a run builds from its options: each a parse of a flag, the label map a file read.
BUILT_FROM_OPTIONS = ("read_config", "image_config", "shard_counts", "pinned_labels")


def _flags(tmp_path) -> list[str]:
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    (tmp_path / "labels.txt").write_text("astronaut\ncoffee\nchelsea\nrocket\n")
    line = "--manifest {m} --output {out} --no_progress --label_map {labels}"
    return arguments(line, m=manifest, out=tmp_path / "out", labels=tmp_path / "labels.txt")


def _command_line(flags: list[str], beam: list[str]) -> None:
    assert main(["convert", *flags, *beam]) == 0


def _run(flags: list[str], beam: list[str]) -> None:
    assert not run([*flags, *beam]).info.failures


def _python_api(flags: list[str], beam: list[str]) -> None:
    options = ConvertOptions(
        manifest=[flags[1]], output=flags[3], progress=False, label_map=flags[-1]
    )
    assert not convert(options, beam).info.failures


@pytest.fixture
def counted(monkeypatch):
    """Calls of each builder of a run's configs, and reads of a file, by name."""
    calls: dict[str, int] = {}

    def counting(name: str, function):
        def counted_call(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return function(*args, **kwargs)

        return counted_call

    for name in BUILT_FROM_OPTIONS:
        monkeypatch.setattr(ConvertOptions, name, counting(name, getattr(ConvertOptions, name)))
    read_text = fileio.read_text
    # Every reader of a text file goes through fileio.
    monkeypatch.setattr(fileio, "read_text", lambda path: counting(path, read_text)(path))
    return calls


@pytest.mark.parametrize("start", [_command_line, _run, _python_api])
@pytest.mark.parametrize("beam", [[], BEAM], ids=["local", "beam"])
def test_options_are_checked_once_a_run(tmp_path, counted, start, beam):
    flags = _flags(tmp_path)
    start(flags, beam)
    assert counted[flags[-1]] == 1  # --label_map read once
    assert {name: counted[name] for name in BUILT_FROM_OPTIONS} == dict.fromkeys(
        BUILT_FROM_OPTIONS, 1
    )


@pytest.mark.parametrize("start", [_command_line, _run, _python_api])
def test_the_runner_is_decided_once_a_run(tmp_path, monkeypatch, start):
    decided = []
    describe = runner_choice.describe

    def counted_describe(runner, options):
        decided.append(type(runner).__name__)
        return describe(runner, options)

    # Uncached, so that every decision is counted, not only the first for these flags.
    monkeypatch.setattr(runner_choice, "_resolve", runner_choice._resolve.__wrapped__)
    monkeypatch.setattr(runner_choice, "describe", counted_describe)
    start(_flags(tmp_path), BEAM)
    assert decided == ["SwitchingDirectRunner"]


def test_a_wrong_value_stops_the_run_before_any_work(tmp_path):
    options = ConvertOptions(manifest=["m.csv"], output=str(tmp_path / "out"), channels=2)
    with pytest.raises(UserError, match="--channels must be 1 or 3"):
        prepare(options)
    # 100,000 processes were forked, for longer than any conversion would take.
    many = ConvertOptions(manifest=["m.csv"], output=str(tmp_path / "out"), processes=100_000)
    with pytest.raises(UserError, match="--processes must be 0 \\(automatic\\) to 1,024"):
        prepare(many)
    missing = ConvertOptions(manifest=["m.csv"], output=str(tmp_path / "out"), label_map="none")
    with pytest.raises(UserError, match="--label_map: cannot read none"):
        prepare(missing)
    assert not (tmp_path / "out").exists()


def test_the_stages_configs_come_from_the_checked_options(tmp_path):
    (tmp_path / "labels.txt").write_text("b\na\n")
    options = ConvertOptions(
        manifest=["m.csv"],
        output="out",
        label_map=str(tmp_path / "labels.txt"),
        label_offset=1,
        num_shards="train=3",
        max_file_mb=2,
        compression="gzip",
    )
    conversion = prepare(options)
    assert conversion.runner == runner_choice.LOCAL and conversion.beam_args == ()
    plan = conversion.plan_config(inherited=None, detection=True)
    assert plan.labels.pinned.names == ("b", "a") and plan.labels.offset == 1
    assert plan.counts.for_split("train") == 3 and plan.max_file_bytes == 2 << 20
    assert plan.detection
    write = conversion.write_config("staging", processes=2)
    assert write.image is conversion.image and write.processes == 2
    assert write.shard_format == ShardFormat("tfrecord", "gzip")
    commit = conversion.commit_config(target=None)
    assert commit.options == options.recorded() and commit.max_error_rate == 0.01


def test_a_test_pipeline_is_the_runner_it_runs_on(tmp_path):
    from apache_beam.testing.test_pipeline import TestPipeline

    pipeline = TestPipeline()
    options = ConvertOptions(manifest=["m.csv"], output=str(tmp_path / "out"))
    assert prepare(options, (), pipeline).runner.name == type(pipeline.runner).__name__
    converted = run(_flags(tmp_path), test_pipeline=pipeline)
    assert converted.info.records == 4 and not converted.info.failures
