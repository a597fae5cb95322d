"""Every read-side command meets a malformed dataset root with one line on stderr and its
documented status, never a traceback: `verify` reports it as a problem (status 1), `preview`
and `stats` as an input mistake (status 2), `load()` raises ValueError. The roots are made for
real: a folder, real symbolic links (to a file outside the root, to a pointer outside it that
names a sound version, to a folder; `versions/` to a sound copy outside), garbage, files where
folders belong, damaged shards."""

import shutil
from pathlib import Path

import pytest
from conftest import REPOSITORY, command, convert_into

from tfrecord_pipeline.dataset.versions import POINTER, VERSIONS

pytestmark = pytest.mark.slow
SAMPLE = REPOSITORY / "sample" / "manifest.csv"


def _replace(path: Path, make) -> None:
    """`path` removed (file or folder) and made again by `make(path)`."""
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    make(path)


def _only_version(root: Path) -> Path:
    (version,) = (root / VERSIONS).iterdir()
    return version


def _shard(root: Path) -> Path:
    return sorted(_only_version(root).glob("train-*.tfrecord"))[0]


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))


MALFORMED = {
    "LATEST a folder": lambda root: _replace(root / POINTER, Path.mkdir),
    "LATEST a link to a file outside": lambda root: _replace(
        root / POINTER, lambda p: p.symlink_to(root.parent / "outside.txt")
    ),
    "LATEST a link to a sound pointer outside": lambda root: _replace(
        root / POINTER, lambda p: p.symlink_to(root.parent / "pointer")
    ),
    "LATEST a link to a folder": lambda root: _replace(
        root / POINTER, lambda p: p.symlink_to(root / VERSIONS)
    ),
    "versions a link to a sound copy outside": lambda root: _replace(
        root / VERSIONS, lambda p: p.symlink_to(root.parent / "versions")
    ),
    "garbage in LATEST": lambda root: (root / POINTER).write_bytes(b"\x00\xff{garbage"),
    "the version a file": lambda root: _replace(_only_version(root), lambda p: p.write_text("x")),
    "versions a file": lambda root: _replace(root / VERSIONS, lambda p: p.write_text("x")),
    "an empty folder": lambda root: shutil.rmtree(root) or root.mkdir(),
    "a path that does not exist": lambda root: shutil.rmtree(root),
    "a shard missing": lambda root: _shard(root).unlink(),
    "a shard damaged": lambda root: _flip(_shard(root)),
}
# The damaged shards are verify's own findings (tests/test_verify.py); preview and stats, which
# read every record, must still say it in a line.
ROOT_CASES = [case for case in MALFORMED if "shard" not in case]


@pytest.fixture(scope="module")
def sound(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sound") / "out"
    convert_into(SAMPLE, root, "--num_shards", "1")
    return root


@pytest.fixture(params=list(MALFORMED))
def malformed(request, sound, tmp_path) -> tuple[str, Path]:
    root = tmp_path / "root"
    shutil.copytree(sound, root)
    (tmp_path / "outside.txt").write_text("not a pointer\n")
    shutil.copy(sound / POINTER, tmp_path / "pointer")
    shutil.copytree(sound / VERSIONS, tmp_path / "versions")
    MALFORMED[request.param](root)
    return request.param, root


@pytest.mark.parametrize(
    "words, status",
    [
        (["verify"], 1),
        (["preview", "-o", "{out}/grid.png"], 2),
        (["stats", "-o", "{out}/r.html"], 2),
    ],
)
def test_a_malformed_root_is_one_line_and_its_status(malformed, words, status, tmp_path):
    case, root = malformed
    if words[0] == "verify" and case not in ROOT_CASES:
        pytest.skip("verify lists each damaged shard's problems: tests/test_verify.py")
    argv = [words[0], str(root), *(word.format(out=tmp_path) for word in words[1:])]
    if case == "a path that does not exist":
        status = 2  # a mistyped path is the command's mistake, not a finding of verify's
    done = command(*argv)
    assert (done.returncode, done.stdout) == (status, ""), (case, done.stderr)
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, case
    assert str(root) in done.stderr
    if words[0] == "verify":  # the root named once: it printed `ROOT: ROOT holds no ...`
        assert done.stderr.count(str(root)) == 1, (case, done.stderr)


def test_load_raises_one_value_error_for_a_malformed_root(malformed):
    from tfrecord_pipeline.read.load import load

    case, root = malformed
    if case not in ROOT_CASES:
        pytest.skip("load reads shards through tf.data, which reports a damaged one itself")
    with pytest.raises(ValueError) as raised:
        load(str(root))
    assert "\n" not in str(raised.value), case


def test_a_link_to_a_sound_pointer_is_refused_not_followed(sound, tmp_path):
    """The pointer outside names a version this root holds, and the reader still refuses: a
    link in the layout is never followed, wherever it leads."""
    root = tmp_path / "root"
    shutil.copytree(sound, root)
    shutil.copy(sound / POINTER, tmp_path / "pointer")
    assert command("verify", str(root)).returncode == 0
    MALFORMED["LATEST a link to a sound pointer outside"](root)
    done = command("verify", str(root))
    assert done.returncode == 1 and "symbolic link" in done.stderr


@pytest.mark.parametrize("slash", ["", "/"])
def test_verify_names_a_folder_that_holds_no_dataset_once(tmp_path, slash):
    done = command("verify", f"{tmp_path}{slash}")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"{tmp_path} holds no published dataset: neither a dataset root (LATEST) nor a complete "
        "version folder (_COMMITTED)\n"
    )
