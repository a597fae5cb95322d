"""pipeline/cli/unchanged.py: a run that publishes what the version before it held says so."""

from pathlib import Path

from conftest import make_images, write_manifest

from tfrecord_pipeline.cli.main import main

NOTE = "holds the same records, labels and errors as"


def _said(capsys, manifest: Path, out: Path, *flags: str) -> list[str]:
    argv = ["convert", "--manifest", str(manifest), "--output", str(out), "--no_progress"]
    assert main([*argv, *flags]) == 0
    return [line for line in capsys.readouterr().err.splitlines() if NOTE in line]


def test_a_second_identical_run_says_its_version_holds_what_the_one_before_held(tmp_path, capsys):
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=2))
    out = tmp_path / "out"
    assert _said(capsys, manifest, out) == []  # the first: nothing before it
    (note,) = _said(capsys, manifest, out)
    first, second = sorted(path.name for path in (out / "versions").iterdir())
    assert note.startswith(f"tfrecord-pipeline: note: {second} {NOTE} {first}, published")
    shards = sorted((out / "versions" / first).glob("train-*"))
    assert [p.read_bytes() for p in shards] == [
        (out / "versions" / second / p.name).read_bytes() for p in shards
    ]
    assert len(_said(capsys, manifest, out, "--incremental", "--run_key", "night-2")) == 1
    assert _said(capsys, manifest, out, "--num_shards", "2") == []  # other shards: changed
