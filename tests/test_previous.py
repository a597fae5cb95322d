"""pipeline/dataset/previous.py: the version a run starts from, its label ids kept (a refresh
that inherits them end to end: test_refresh.py)."""

import pytest
from conftest import dataset_info

from tfrecord_pipeline.dataset.previous import Previous, base_version, check_label_offset
from tfrecord_pipeline.dataset.publish import start
from tfrecord_pipeline.transforms.errors import UserError


def _previous(labels: dict) -> Previous:
    return Previous("root/versions/v000001-0123abcd", dataset_info(labels=labels))


def test_the_label_map_is_the_published_versions():
    named = _previous({"kind": "names", "offset": 1, "names": ["cat", "dog"]}).labels()
    assert (named.names, named.offset, named.integers) == (("cat", "dog"), 1, False)
    assert _previous({"kind": "integers", "offset": 0, "names": []}).labels().integers


@pytest.mark.parametrize("offset", [0, 1])
def test_names_keep_their_ids_an_offset_of_0_or_their_own_is_accepted(offset):
    check_label_offset(_previous({"kind": "names", "offset": 1, "names": ["cat"]}), offset)


def test_another_offset_would_shift_the_ids_and_is_refused():
    with pytest.raises(UserError, match=r"^--label_offset 2: the published version's ids start"):
        check_label_offset(_previous({"kind": "names", "offset": 1, "names": ["cat"]}), 2)
    check_label_offset(_previous({"kind": "integers", "offset": 0, "names": []}), 2)


def test_a_first_run_starts_from_no_version(tmp_path):
    assert base_version(start(str(tmp_path))) is None
