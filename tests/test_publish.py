"""pipeline/dataset/publish.py on a local folder: the version a run starts, the folders it
refuses to write into, and the pointer's compare-and-write between two runs."""

import dataclasses
import re
from pathlib import Path

import pytest

from tfrecord_pipeline.dataset.history import Record, newest_first, read_records
from tfrecord_pipeline.dataset.publish import (
    SupersededError,
    Target,
    _recorded_since,
    publish,
    published_since,
    start,
)
from tfrecord_pipeline.dataset.versions import MARKER, POINTER, VERSIONS, Pointer
from tfrecord_pipeline.transforms.errors import UserError


def test_a_run_starts_the_version_after_the_published_one_under_a_name_of_its_own(tmp_path):
    first = start(str(tmp_path / "new"))
    assert re.fullmatch(r"v000001-[0-9a-f]{8}", first.version) and first.base is None
    assert start(str(tmp_path / "new")).version != first.version
    root = tmp_path / "root"
    root.mkdir()
    pointer = Pointer("v000041-0123abcd", "0" * 64)
    (root / POINTER).write_bytes(pointer.to_bytes())
    (root / f"{POINTER}.tmp-1234").write_bytes(b"left by a killed write")
    target = start(str(root))
    assert target.version.startswith("v000042-") and target.base == pointer
    assert target.folder == f"{root}/{VERSIONS}/{target.version}"


@pytest.mark.parametrize(
    "names, says",
    [
        (["a", "b", "c", "d"], "is not empty and is not a tfrecord-pipeline dataset (it holds "),
        ([MARKER, "x.tfrecord"], "holds a dataset in the single-folder layout"),
        ([f"{VERSIONS}/v000001-0123abcd/{MARKER}"], "is a version of a dataset; --output names"),
    ],
)
def test_a_folder_another_tool_or_layout_wrote_is_refused(tmp_path, names, says):
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    folder = (tmp_path / names[-1]).parent
    with pytest.raises(UserError, match=re.escape(says)) as raised:
        start(str(folder))
    if len(names) > 3:
        assert str(raised.value).count(", ") == 3 and ", ..." in str(raised.value)


def _complete(target: Target) -> Target:
    """`target`'s version as a run leaves it just before publishing: marked complete."""
    Path(target.folder).mkdir(parents=True)
    (Path(target.folder) / MARKER).write_text("")
    return target


def test_of_two_runs_from_one_version_the_second_to_publish_is_superseded(tmp_path):
    one, other = _complete(start(str(tmp_path))), start(str(tmp_path))
    first = Pointer(one.version, "1" * 64)
    publish(one, first)
    publish(one, first)  # a retried commit: already done
    assert published_since(one) is None and published_since(other) == first
    with pytest.raises(SupersededError, match=f"another run published {first.version} in "):
        publish(other, Pointer(other.version, "2" * 64))
    assert Pointer.parse((tmp_path / POINTER).read_bytes(), "LATEST") == first


def test_a_run_numbers_after_every_version_ever_published_whatever_latest_names(tmp_path):
    """Numbers come from the version folders, the publication records and the pointer: a
    version folder deleted by hand, or LATEST pointing at an older version, reuses none."""
    first = _complete(start(str(tmp_path)))
    publish(first, Pointer(first.version, "1" * 64))
    second = _complete(start(str(tmp_path)))
    publish(second, Pointer(second.version, "2" * 64))
    (tmp_path / POINTER).write_bytes(Pointer(first.version, "1" * 64).to_bytes())
    assert start(str(tmp_path)).version.startswith("v000003-")
    assert [r.version for r in read_records(str(tmp_path))] == [first.version, second.version]
    target = _complete(start(str(tmp_path)))
    publish(target, Pointer(target.version, "3" * 64))  # LATEST by hand: recorded first
    order = [first.version, second.version, first.version, target.version]
    assert [r.version for r in read_records(str(tmp_path))] == order
    assert [r.serial for r in read_records(str(tmp_path))] == [1, 2, 3, 4]
    assert start(str(tmp_path)).version.startswith("v000004-")


def test_publication_order_is_by_the_last_record_of_each_version():
    a, b, c = "v000001-0123abcd", "v000002-0123abcd", "v000003-0123abcd"
    records = [Record(1, a), Record(2, b), Record(3, a), Record(4, c)]
    assert newest_first(records) == [c, a, b]
    from_b = Target("root", c, Pointer(b, "0" * 64), serial=2)
    assert _recorded_since(from_b, records) == a
    assert _recorded_since(dataclasses.replace(from_b, serial=3), records) is None
    # A run that read its base's pointer before the base's record was written: not a loss.
    from_a = Target("root", c, Pointer(a, "0" * 64), serial=2)
    assert _recorded_since(from_a, records) is None
    assert Record(4, c).name == f"00000004-{c}"
