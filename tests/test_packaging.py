"""How the project installs: one import name that a user's own modules cannot shadow, the
sdist Dataflow workers install from, and the extras the read side asks for by name. (A built
wheel in an empty virtualenv: tests/test_wheel.py.)"""

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPOSITORY, make_images, pip_install, python_path, write_manifest

import tfrecord_pipeline

pytestmark = pytest.mark.slow
# The checkout's folders and what each is installed as (setup.py's package_dir).
FOLDERS = {"pipeline": "tfrecord_pipeline", "transforms": "tfrecord_pipeline/transforms"}
PROTO = "tfrecord_pipeline/transforms/tfrecord/proto/example.proto"
# Every module of the package, imported: none may import a top-level `pipeline` or `transforms`.
IMPORT_ALL = """
import importlib, pkgutil, sys
import tfrecord_pipeline
for module in pkgutil.walk_packages(tfrecord_pipeline.__path__, "tfrecord_pipeline."):
    importlib.import_module(module.name)
assert not {"pipeline", "transforms"} & set(sys.modules), "a generic name was imported"
records, problems = tfrecord_pipeline.verify("out")
print(records, problems, tfrecord_pipeline.__file__)
"""


def _user_project(folder: Path) -> Path:
    """A training project of the kind the issue met: its own `pipeline.py`, `pipeline/` and
    `transforms.py` (each refusing to be imported), and a manifest of a few photos."""
    for name in ("pipeline.py", "pipeline/__init__.py", "transforms.py"):
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"raise ImportError('the project\\'s own {name} was imported')\n")
    write_manifest(folder / "data" / "manifest.csv", make_images(folder / "data", per_class=2))
    return folder


def test_the_cli_and_the_import_work_from_a_folder_with_its_own_pipeline_and_transforms(tmp_path):
    project = _user_project(tmp_path / "training")
    environment = {**os.environ, "PYTHONPATH": python_path()}  # the installed copy
    flags = ["convert", "--manifest", "data/manifest.csv", "--no_progress", "--output"]
    # The command as installed, and as `python -m`, which puts the current folder first.
    for cli, output in (
        ([Path(sys.executable).parent / "tfrecord-pipeline"], "out"),
        ([sys.executable, "-m", "tfrecord_pipeline.cli.main"], "out-m"),
    ):
        argv = [*cli, *flags, output]
        converted = subprocess.run(argv, cwd=project, env=environment, capture_output=True)
        assert converted.returncode == 0, converted.stderr
    # `python -c` puts the current folder first on sys.path: the project's modules come first.
    imported = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert imported.returncode == 0, imported.stderr
    records, problems, where = imported.stdout.split(" ", 2)
    assert (records, problems) == ("8", "[]")
    assert Path(where.strip()) == Path(tfrecord_pipeline.__file__)  # the copy under test


def test_the_sdist_dataflow_workers_build_holds_both_folders_and_installs_one_package(tmp_path):
    """`--setup_file` has Beam build an sdist in setup.py's folder (`python setup.py sdist`
    when the `build` module is missing, as here); workers pip install it."""
    subprocess.run(
        [sys.executable, "setup.py", "--quiet", "sdist", "--dist-dir", str(tmp_path)],
        cwd=REPOSITORY,
        check=True,
        capture_output=True,
    )
    (sdist,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    sources = {
        str(path.relative_to(REPOSITORY))
        for folder in FOLDERS
        for path in (REPOSITORY / folder).rglob("*")
        if path.suffix in (".py", ".proto")
    }
    assert sources and sources <= names
    site = pip_install(sdist, tmp_path / "site")
    assert sorted(p.name for p in site.iterdir() if not p.name.endswith("-info")) == [
        "bin",
        "tfrecord_pipeline",
    ]
    assert (site / PROTO).is_file()
    installed = {str(path.relative_to(site)) for path in site.rglob("*.py")}
    assert installed == {
        str(Path(FOLDERS[path.parts[0]], *path.parts[1:]))
        for path in map(Path, sources)
        if path.suffix == ".py"
    }


def test_without_tensorflow_the_readers_name_the_extra_in_one_line():
    """Python refuses to import a module whose sys.modules entry is None, as it refuses one
    that is not installed: the conversion path and the CLI need neither."""
    script = """
import sys
sys.modules["tensorflow"] = sys.modules["tensorflow_datasets"] = None
import tfrecord_pipeline
from tfrecord_pipeline import *
for call in (tfrecord_pipeline.load, tfrecord_pipeline.tfds_builder):
    try:
        call("out")
    except ImportError as error:
        print(error)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": python_path()},
        capture_output=True,
        text=True,
    )
    assert done.stdout == (
        "load() needs TensorFlow: pip install tensorflow "
        "(or install tfrecord-pipeline with its [tf] extra)\n"
        "tfds_builder() needs TensorFlow Datasets: pip install tensorflow tensorflow-datasets "
        "(or install tfrecord-pipeline with its [tfds] extra)\n"
    ), done.stderr


def test_the_public_api_is_what_the_docs_name():
    from tfrecord_pipeline.read.verify import verify

    assert tfrecord_pipeline.verify is verify
    assert set(tfrecord_pipeline.__all__) >= {
        "ConvertOptions",
        "DatasetInfo",
        "__version__",
        "convert",
        "grain_source",
        "load",
        "tfds_builder",
        "verify",
    }
    assert all(getattr(tfrecord_pipeline, name) for name in tfrecord_pipeline.__all__)
    with pytest.raises(ValueError, match="decode is one of sample, all, none, not 'some'"):
        verify("anywhere", decode="some")
