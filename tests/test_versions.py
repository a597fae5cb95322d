"""pipeline/dataset/versions.py: the pointer's bytes, a version's place in publication order, and
how a reader resolves a root or a version folder, checking what the pointer and marker promise."""

import pytest

from tfrecord_pipeline.dataset.metadata import INFO_FILE
from tfrecord_pipeline.dataset.versions import (
    MARKER,
    POINTER,
    VERSIONS,
    DatasetError,
    Pointer,
    marker_bytes,
    metadata_digest,
    resolve,
    sequence,
)

VERSION = "v000003-9f2c4e1a"
INFO = b'{"records": 3}'
NOT_MARKED = f"{INFO_FILE} is not the file its {MARKER} marker names"


def test_a_pointer_is_one_sorted_json_line_that_parses_back():
    pointer = Pointer(VERSION, metadata_digest(INFO))
    assert pointer.to_bytes() == (
        b'{"sha256": "' + pointer.sha256.encode() + b'", "version": "' + VERSION.encode() + b'"}\n'
    )
    assert Pointer.parse(pointer.to_bytes(), "r/LATEST") == pointer


@pytest.mark.parametrize(
    "data, says",
    [
        (b"v000003-9f2c4e1a\n", "is not a version pointer"),  # not JSON
        (b"[1, 2]", "is not a version pointer"),
        (b'{"version": "v000003-9f2c4e1a"}', "is not a version pointer"),
        (b'{"version": "../../etc", "sha256": ""}', "names no version of this tool"),
        (b'{"version": "v3-9f2c4e1a", "sha256": ""}', "names no version of this tool"),
    ],
)
def test_a_pointer_this_tool_did_not_write_is_refused(data, says):
    with pytest.raises(DatasetError, match=f"^r/LATEST {says}"):
        Pointer.parse(data, "r/LATEST")


def test_versions_are_ordered_by_their_number_and_other_names_come_first():
    assert sequence(VERSION) == 3 and sequence("v1234567-00000000") == 1234567
    assert sequence("v000003-9F2C4E1A") == sequence("notes") == sequence("v000003") == 0


def test_the_marker_names_the_digest_of_the_metadata_file():
    assert metadata_digest(INFO) == metadata_digest(bytes(INFO)) != metadata_digest(INFO + b" ")
    assert marker_bytes(INFO) == f'{{"{INFO_FILE}": "{metadata_digest(INFO)}"}}'.encode()


FOLDER = f"root/{VERSIONS}/{VERSION}"


def _root(**replaced: bytes | None) -> dict[str, bytes]:
    """A published root's files by path; a file replaced by None is absent."""
    files = {
        "pointer": Pointer(VERSION, metadata_digest(INFO)).to_bytes(),
        "marker": marker_bytes(INFO),
        "info": INFO,
        **replaced,
    }
    paths = {"pointer": f"root/{POINTER}", "marker": f"{FOLDER}/{MARKER}"}
    paths["info"] = f"{FOLDER}/{INFO_FILE}"
    return {paths[name]: data for name, data in files.items() if data is not None}


def test_a_root_resolves_to_the_version_its_pointer_names_and_a_folder_to_itself():
    published = resolve("root/", _root().get)
    assert published == (FOLDER, INFO.decode())
    assert resolve(FOLDER, _root().get) == published


@pytest.mark.parametrize(
    "files, says",
    [
        ({}, "root holds no published dataset"),
        (_root(marker=None), "which LATEST names, is not complete"),
        (_root(info=INFO + b" "), NOT_MARKED),
        (_root(info=None), NOT_MARKED),
        (_root(marker=b"{}"), NOT_MARKED),
        (_root(pointer=Pointer(VERSION, "0" * 64).to_bytes()), NOT_MARKED),
    ],
    ids=["nothing", "no-marker", "changed-info", "no-info", "empty-marker", "other-digest"],
)
def test_a_version_that_is_not_what_its_pointer_and_marker_promise_is_refused(files, says):
    with pytest.raises(DatasetError, match=says):
        resolve("root", files.get)
