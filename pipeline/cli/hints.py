"""What a finished conversion says after its table, on stderr: that its version holds what the
one before it held (pipeline/cli/unchanged.py), warnings (labels from 0 for a reader that
subtracts 1, a --label_offset integer labels ignore, a --split name no row fell in, a
--num_shards split no row has, a shard count a refresh did not apply, shards left empty, labels
differing only in case or spaces), why the version was not published (naming its first
rejected rows), and a hint when image paths look written relative to the current folder, or
with backslashes.
All are read from the version the run wrote (its metadata, labels.txt, a bounded sample of its
errors files), so they hold for every runner alike and change no byte of it.
"""

import itertools
import os
import re

from tfrecord_pipeline.cli.rejected import error_rows, first_rejected
from tfrecord_pipeline.cli.unchanged import unchanged_line
from tfrecord_pipeline.config.presets import PRESETS, one_based_warning
from tfrecord_pipeline.dataset.labels_file import label_names
from tfrecord_pipeline.dataset.metadata import DatasetInfo
from tfrecord_pipeline.dataset.versions import DatasetError
from tfrecord_pipeline.transforms.errors import Reason
from tfrecord_pipeline.transforms.manifest.labels import alike
from tfrecord_pipeline.transforms.manifest.splits import parse_split_spec
from tfrecord_pipeline.transforms.plan.sharding import (
    LEAST_INDEXED_RECORDS,
    parse_shard_counts,
    shards_left_full,
)
from tfrecord_pipeline.transforms.storage import fileio

# Missing files whose paths are checked against the current folder: a sample, so a manifest of
# any size costs a few stats; it is taken from the first error rows read, at most SCANNED_ROWS.
SAMPLED_MISSING = 20
SCANNED_ROWS = 2_000
_WHERE_IN_MANIFEST = re.compile(r"(@\d+|#\d+|#images\[\d+\])$")  # rows.py `record_source`


def closing_lines(info: DatasetInfo, folder: str, image_root: str | None, here: str) -> list[str]:
    """What the command prints on stderr after a run's table: warnings, why the version was
    not published, then a hint at the likely cause; `here` is the current folder."""
    warnings = [
        one_based_warning(info),
        unapplied_label_offset(info),
        *empty_split_warnings(info),
        *unused_shard_counts(info),
        *unapplied_shard_counts(info),
        *empty_shard_warnings(info),
        alike_labels_warning(info, folder),
    ]
    failures = [f"tfrecord-pipeline: version not published: {text}" for text in info.failures]
    rejected = first_rejected(info, folder)
    hint = missing_files_hint(info, folder, image_root, here)
    # The rows before the reason that counts them: a scheduler shows a command's last line.
    lines = (unchanged_line(info, folder), *warnings, rejected, *failures, hint)
    return [line for line in lines if line]


def alike_labels_warning(info: DatasetInfo, folder: str) -> str | None:
    """A line when label names differ only in case or spacing (`cat`, `Cat`): each is a class
    of its own, as a case that means something needs (EMNIST's `a` and `A`), so they are kept
    apart, and said. A labels.txt that cannot be read is verify's to report."""
    if info.labels.get("kind") != "names":
        return None
    try:
        groups = alike(label_names(folder, info))
    except (DatasetError, *fileio.READ_ERRORS):
        return None
    if not groups:
        return None
    shown = "; ".join(" and ".join(repr(name) for name in group) for group in groups[:3])
    more = f" (and {len(groups) - 3:,} more such groups)" if len(groups) > 3 else ""
    return (
        f"tfrecord-pipeline: warning: labels {shown}{more} differ only in case or spaces, so "
        "each is a class of its own: if they name one class, write them one way"
    )


def unapplied_label_offset(info: DatasetInfo) -> str | None:
    """A line when --label_offset was given for labels that are integer ids, which are used as
    written: the offset numbers names only. A preset's own offset says nothing."""
    offset = info.options.get("label_offset")
    if not offset or info.options.get("preset") or info.labels.get("kind") != "integers":
        return None
    return (
        f"tfrecord-pipeline: warning: --label_offset {offset} is not applied: the labels are "
        "integer ids, used as written (the offset numbers name labels); write the ids shifted"
    )


def empty_split_warnings(info: DatasetInfo) -> list[str]:
    """A line for each split `--split` names that no row fell in (on a few rows, a small
    fraction often gets none): the version is published without it, and a reader asking for
    it fails later. A run of no records (which fails) says nothing here."""
    named = info.options.get("split")
    if not named or not info.records:
        return []
    return [
        f"tfrecord-pipeline: warning: --split names {name!r} but no row of {info.rows_in:,} "
        f"fell in it, so the version has no {name!r} split: give it a larger fraction, "
        "or give the rows a split column"
        for name in parse_split_spec(named).names
        if name not in info.splits
    ]


def unused_shard_counts(info: DatasetInfo) -> list[str]:
    """A line for each split `--num_shards` gives a count that no row has (a misspelt name, or
    rows that all fell in other splits): the count is not used. A preset's counts, a split
    `--split` names (warned about above) and a run of no records say nothing here."""
    options = info.options
    counts, preset = options.get("num_shards"), PRESETS.get(options.get("preset") or "")
    if not counts or not info.records or (preset and counts == preset.num_shards):
        return []
    by_split = parse_split_spec(options["split"]).names if options.get("split") else ()
    return [
        f"tfrecord-pipeline: warning: --num_shards names {name!r} but no row of "
        f"{info.rows_in:,} has that split, so its count is not used: check the name, or give "
        "the rows a split column"
        for name, _ in parse_shard_counts(counts).per_split
        if name not in info.splits and name not in by_split
    ]


def unapplied_shard_counts(info: DatasetInfo) -> list[str]:
    """A line for each split of a refresh whose shard count is not the one --num_shards asks:
    a refresh keeps the published shards and adds new ones (docs/output.md), which a count
    given on the command line does not suggest."""
    if info.refresh is None:
        return []
    counts = parse_shard_counts(info.options.get("num_shards"))
    return [
        f"tfrecord-pipeline: warning: split {name!r} has {len(split.shards):,} shards, not the "
        f"{asked:,} --num_shards asks: a refresh keeps the published shards and adds new ones; "
        "a run without --incremental applies it"
        for name, split in sorted(info.splits.items())
        if (asked := counts.for_split(name)) and asked != len(split.shards)
    ]


def empty_shard_warnings(info: DatasetInfo) -> list[str]:
    """A line for each split of records that left shards empty (with `--write_index`, of 0 or
    1 records, which the PyTorch tfrecord package's index reader fails on), with the count and
    why; a split of no records (which fails the run) says nothing here, nor one of a record
    under `--write_index`. In a refresh an empty shard is a new one whose rows were all
    rejected (docs/output.md), whatever the shard count."""
    least = LEAST_INDEXED_RECORDS if info.options.get("write_index") else 1
    lines = []
    for name, split in sorted(info.splits.items()):
        few = sum(1 for shard in split.shards if shard.records < least)
        if not few or split.examples < least:
            continue
        why = (
            f"records go to shards by key hash: with --num_shards {name}="
            f"{shards_left_full(split.examples, least)} or fewer, one is unlikely"
        )
        if info.refresh is not None:
            why = (
                "a refresh's new shard whose rows were all rejected stays empty until the next "
                "refresh; a run without --incremental leaves none"
            )
        said = "empty: some readers fail on an empty shard"
        if least > 1:
            said = "of 0 or 1 records: the PyTorch tfrecord package fails on such a shard"
        lines.append(
            f"tfrecord-pipeline: warning: split {name!r} has {split.examples:,} records in "
            f"{len(split.shards):,} shards, {few:,} of them {said} ({why})"
        )
    return lines


def missing_files_hint(
    info: DatasetInfo, folder: str, image_root: str | None, here: str
) -> str | None:
    """A line when at least half the rows are `missing_file` and at least half of a sample of
    them name a file that exists once read differently: relative to `here` (the current
    folder), not to the folder relative paths are read from (`image_root`, else each row's
    manifest's folder); or with its backslashes read as slashes (a manifest made on Windows)."""
    if not info.rows_in or 2 * info.errors_by_reason.get(Reason.MISSING_FILE, 0) < info.rows_in:
        return None
    sampled = _missing_rows(folder, info)
    return _relative_to_here(sampled, image_root, here) or _backslashed(sampled)


def _relative_to_here(sampled: list[dict], image_root: str | None, here: str) -> str | None:
    bases = [_base(row, image_root) for row in sampled]
    found = [
        base
        for row, base in zip(sampled, bases, strict=True)
        if _found_here(row["row"]["image_uri"], base, here)
    ]
    if not found or 2 * len(found) < len(sampled):
        return None
    read_from = f"--image_root {image_root}" if image_root else "the manifest's folder"
    if not image_root:
        read_from += f" ({found[0].rstrip('/')})"
    return (
        "tfrecord-pipeline: hint: most missing files exist relative to the current folder "
        f"({here}); relative paths are read from {read_from}: use --image_root ."
    )


def _backslashed(sampled: list[dict]) -> str | None:
    """On Linux and macOS a backslash is a character of a file's name, never a separator."""
    uris = [row["row"]["image_uri"] for row in sampled]
    found = [
        uri
        for uri in uris
        if "\\" in uri and not fileio.is_remote(uri) and os.path.isfile(uri.replace("\\", "/"))
    ]
    if not found or 2 * len(found) < len(sampled):
        return None
    return (
        f"tfrecord-pipeline: hint: most missing files exist with / for \\ in their paths "
        f"({found[0]}): write the manifest's image paths with / between folders"
    )


def _missing_rows(folder: str, info: DatasetInfo) -> list[dict]:
    """Up to SAMPLED_MISSING `missing_file` rows of the version's errors files, among the first
    SCANNED_ROWS read."""
    scanned = itertools.islice(error_rows(folder, info), SCANNED_ROWS)
    missing = (row for row in scanned if row["reason"] == Reason.MISSING_FILE)
    return list(itertools.islice(missing, SAMPLED_MISSING))


def _base(row: dict, image_root: str | None) -> str:
    """The folder, with a separator, a relative image path of `row` was read from (as
    transforms/manifest/sources.py and ReadConfig resolve it)."""
    if image_root:
        return fileio.join(image_root, "")
    return fileio.join(fileio.dirname(_WHERE_IN_MANIFEST.sub("", row["source"])), "")


def _found_here(image_uri: str, base: str, here: str) -> bool:
    """Whether `image_uri`, read as `base` + a relative path, names a file under `here`."""
    if not image_uri.startswith(base) or fileio.join(here, "") == base:
        return False
    return os.path.isfile(os.path.join(here, image_uri[len(base) :]))
