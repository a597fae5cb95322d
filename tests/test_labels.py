"""transforms/manifest/labels.py: label ids from names or integers, with an offset or a pinned
labels.txt, and that file's text."""

import pytest

from tfrecord_pipeline.transforms.errors import Reason, RowError, UserError
from tfrecord_pipeline.transforms.manifest.labels import (
    MAX_LABEL_BYTES,
    LabelMap,
    alike,
    check_label,
    inherited_label_map,
    label_map_from_labels,
    parse_label_map,
)


def test_labels_sorted_by_name_with_offset_and_pinned_map():
    labels = label_map_from_labels(["tulip", "daisy", "rose", "daisy"], offset=1)
    assert [labels.id_of(n) for n in ("daisy", "rose", "tulip")] == [1, 2, 3]
    pinned = parse_label_map(labels.to_text(), offset=1)
    assert pinned == labels
    with pytest.raises(RowError) as error:
        pinned.id_of("sunflower")
    assert error.value.reason is Reason.UNKNOWN_LABEL


def test_integer_labels_pass_through():
    labels = label_map_from_labels(["10", "2", "7"], offset=1)
    assert labels.integers and labels.id_of("10") == 10 and labels.id_of("2") == 2


def test_label_map_file_errors():
    with pytest.raises(UserError):
        parse_label_map("\n\n")
    with pytest.raises(UserError):
        parse_label_map("a\nb\na\n")


def test_a_label_map_is_held_to_the_bounds_of_a_manifests_labels():
    """A --label_map of 150,005 names published them all under the default --max_labels,
    and a line of 300 bytes was a label no manifest cell could give."""
    assert parse_label_map("a\n" + "b" * MAX_LABEL_BYTES).names == ("a", "b" * MAX_LABEL_BYTES)
    with pytest.raises(UserError, match="over 256 bytes"):
        parse_label_map("a\n" + "b" * (MAX_LABEL_BYTES + 1))
    with pytest.raises(UserError, match="3 labels, over --max_labels 2"):
        parse_label_map("a\nb\nc\n", max_labels=2)


def test_label_map_text_round_trip():
    labels = LabelMap(("b", "a"), 0)
    assert labels.to_text() == "b\na\n" and labels.id_of("a") == 1


def test_labels_that_mix_integers_and_names_are_refused_naming_two_of_each():
    with pytest.raises(UserError) as error:
        label_map_from_labels(["cat", "7", "dog", "3", "10", "eel"])
    assert str(error.value).startswith(
        "labels mix integer ids ('3', '7', ...) and names ('cat', 'dog', ...): use one kind"
    )


def test_a_run_whose_labels_mix_kinds_is_refused_after_a_published_version_too():
    with pytest.raises(UserError, match="labels mix"):
        inherited_label_map(LabelMap(("cat",), 0), ["cat", "3"], frozen=False)
    integers = inherited_label_map(LabelMap(("1",), 0, True), ["2"], frozen=False)
    assert integers.names == ("1", "2") and integers.integers


def test_a_label_longer_than_a_class_name_is_a_bad_label():
    assert check_label("é" * (MAX_LABEL_BYTES // 2)) == "é" * 128  # 256 bytes: the most
    with pytest.raises(RowError, match=r"^a label of 258 bytes \('éé") as raised:
        check_label("é" * 129)
    assert raised.value.reason is Reason.BAD_LABEL
    with pytest.raises(RowError, match="a label of 1,024 bytes"):
        check_label("\ud800" + "x" * 1_021)  # a lone surrogate (JSON allows one) counted too


def test_names_differing_only_in_case_or_spacing_are_grouped_and_kept_apart():
    """Each stays a class (EMNIST's `a` and `A` are two); the CLI warns of the groups."""
    names = ["cat", "Cat", "dog", "golden  retriever", "Golden Retriever", "DOG", "emu"]
    assert alike(names) == [
        ("Cat", "cat"),
        ("DOG", "dog"),
        ("Golden Retriever", "golden  retriever"),
    ]
    assert alike(["cat", "dog"]) == []
    assert label_map_from_labels(["cat", "Cat"]).names == ("Cat", "cat")  # ids unchanged
