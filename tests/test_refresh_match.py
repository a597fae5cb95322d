"""transforms/plan/refresh_match.py: rows matched with the published records by key, a bucket
at a time, give what one match of every row gives, however many buckets."""

import pytest

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason
from tfrecord_pipeline.transforms.local.row_buckets import bucket_count, hash_bucket
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow
from tfrecord_pipeline.transforms.plan.refresh_match import PastKey, match_bucket, match_buckets


def _row(key: str) -> ManifestRow:
    return ManifestRow(key, key, "cat", "train", (), "m.csv", 0)


def _past(file: str, keys_prints: list[tuple[str, str]], sound: bool = True) -> list[PastKey]:
    return [PastKey(key, fp, file, at, sound) for at, (key, fp) in enumerate(keys_prints)]


def _matched(rows, fingerprints, past, buckets: int):
    """match_buckets of the rows and records put in `buckets` buckets by their keys' hash:
    (kept positions by shard, keys of the rows to convert, sorted)."""
    bucketed = [([], []) for _ in range(buckets)]
    for row, fingerprint in zip(rows, fingerprints, strict=True):
        bucketed[hash_bucket(row.key, buckets)][0].append((row, fingerprint))
    for record in past:
        bucketed[hash_bucket(record.key, buckets)][1].append(record)
    converted = []
    kept = match_buckets(bucketed, converted.append)
    return {file: list(at) for file, at in kept.items()}, sorted(row.key for row in converted)


# Twelve keys, so some bucket counts split them over every bucket.
SOUND = _past("s0", [(key, f"f{key}") for key in "abcdefgh"]) + _past(
    "s1", [(key, f"f{key}") for key in "ijkl"]
)


@pytest.mark.parametrize("buckets", [1, 2, 3, 7])
def test_a_record_stays_only_when_one_row_has_its_key_and_fingerprint(buckets):
    rows = [_row(key) for key in "abcdefghijk"] + [_row("k"), _row("new"), _row("new")]
    prints = [f"f{key}" for key in "abcdefghij"] + ["fk", "fk", "fnew", "fnew"]
    prints[2] = "CHANGED"  # c
    kept, converted = _matched(rows, prints, SOUND, buckets)
    # k repeated (both converted, its record dropped); l only in the past (dropped); new only in
    # the rows (converted, both of its rows: the writer reports the repeat).
    assert kept == {"s0": [0, 1, 3, 4, 5, 6, 7], "s1": [0, 1]}
    assert converted == ["c", "k", "k", "new", "new"]


@pytest.mark.parametrize("buckets", [1, 3])
def test_the_unchanged_rows_of_a_damaged_shard_are_counted_as_kept_and_converted(buckets):
    past = _past("s0", [("a", "fa"), ("b", "fb")], sound=False) + _past("s1", [("c", "fc")])
    kept, converted = _matched([_row(k) for k in "abc"], ["fa", "fb", "fc"], past, buckets)
    assert kept == {"s0": [0, 1], "s1": [0]}
    assert converted == ["a", "b"]


def test_a_row_without_a_fingerprint_matches_nothing_and_buckets_split_the_keys():
    matched = list(match_bucket([(_row("a"), "")], _past("s0", [("a", "")])))
    assert matched == [_row("a")]
    assert bucket_count(0) == bucket_count(10_000) == 1 and bucket_count(10_001) == 2
    assert len({hash_bucket(key, 7) for key in "abcdefghijkl"}) > 1


def test_the_records_of_an_archive_carried_unread_stay_without_rows():
    """Their rows were never listed; a row of another manifest with such a key is an error."""
    past = _past("s0", [("a.tar#1.jpg", "f1"), ("a.tar#2.jpg", "f2"), ("b.tar#1.jpg", "f3")])
    rows = [(_row("a.tar#2.jpg"), "other"), (_row("loose.jpg"), "f4")]
    matched = list(match_bucket(rows, past, unread={"a.tar"}))
    assert [item.key for item in matched if isinstance(item, PastKey)] == [
        "a.tar#1.jpg",
        "a.tar#2.jpg",
    ]  # b.tar's record has no row: not carried, dropped
    errors = [item for item in matched if isinstance(item, ErrorRow)]
    assert [(error.key, error.reason) for error in errors] == [
        ("a.tar#2.jpg", Reason.DUPLICATE_KEY)
    ]
    assert [item.key for item in matched if isinstance(item, ManifestRow)] == ["loose.jpg"]
