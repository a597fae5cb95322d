"""transforms/plan/carried.py: which archives a refresh carries unread, and the archives file
a version lists them in."""

from collections import namedtuple

from tfrecord_pipeline.transforms.archive.members import key_archive
from tfrecord_pipeline.transforms.plan.carried import (
    ArchiveLine,
    Unread,
    archive_lines,
    carried_lines,
    lines_text,
    parse_lines,
    with_carried,
)
from tfrecord_pipeline.transforms.plan.dataset import PlanStats

LINE = ArchiveLine("/d/000001.tar", "512:17", (("train", 90), ("validation", 10)))


def test_lines_are_made_from_the_rows_identities_and_error_rows_of_archives_only():
    rows = [("/d/b.tar", "train", 3), ("/d/a.tar", "train", 2), ("/d/a.tar", "test", 1)]
    rows.append(("/d/x.parquet", "train", 5))  # a Parquet file's images: no identity, no line
    lines = archive_lines(rows, {"/d/a.tar": "1:1", "/d/b.tar": "2:2"}, {"/d/b.tar": 1})
    assert lines == [
        ArchiveLine("/d/a.tar", "1:1", (("test", 1), ("train", 2)), 0),
        ArchiveLine("/d/b.tar", "2:2", (("train", 3),), 1),
    ]
    assert parse_lines(lines_text(lines)) == {line.path: line for line in lines}


def test_an_archive_is_carried_only_unchanged_clean_and_alone_in_its_name():
    published = {
        LINE.path: LINE,
        "/d/changed.tar": LINE._replace(path="/d/changed.tar"),
        "/d/erred.tar": LINE._replace(path="/d/erred.tar", errors=1),
        "/d/empty.tar": LINE._replace(path="/d/empty.tar", rows=()),
        "/d/twin.tar": LINE._replace(path="/d/twin.tar"),
        "/e/twin.tar": LINE._replace(path="/e/twin.tar"),
    }
    seen = {path: "512:17" for path in published} | {"/d/changed.tar": "513:18", "/d/new.tar": "1"}
    assert carried_lines(seen, published) == [LINE]
    assert carried_lines({LINE.path: ""}, published) == []  # identity unknown: listed


def test_a_key_names_its_archive_only_when_it_is_a_member_s():
    assert key_archive("000001.tar#n01/x.jpg") == "000001.tar"
    assert key_archive("cats/1.jpg") == ""


def test_the_carried_rows_join_the_plan_s_counts_by_split_and_archive():
    stats = PlanStats(frozenset({"cat"}), (("train", 5),), (), labels_given=5)
    carried = with_carried(stats, [LINE])
    assert carried.rows == (("train", 95), ("validation", 10))
    assert carried.labels_given == 105
    assert carried.archives == ((LINE.path, "train", 90), (LINE.path, "validation", 10))
    assert with_carried(stats, []) is stats


def test_a_damaged_shard_lists_its_archives_after_all():
    manifest = namedtuple("Manifest", "path")
    unread = Unread((manifest("/d/a.tar"), manifest("/d/b.tar")))
    assert unread.names == {"a.tar", "b.tar"}
    listed, still = unread.listed({"b.tar"}, unlisted=False)
    assert [m.path for m in listed] == ["/d/b.tar"] and still == {"a.tar"}
    listed, still = unread.listed(set(), unlisted=True)  # a rows file's keys are not known
    assert len(listed) == 2 and not still
