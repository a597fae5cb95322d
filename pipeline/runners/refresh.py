"""`--incremental`: a new version that keeps the published version's unchanged records and
converts only the new and changed rows.

Each version stays self-contained, so a reader never needs another version's files:
- a past shard whose records all stay is carried over whole, as a hard link (a server-side
  copy on Cloud Storage): no byte passes through this process;
- a past shard that lost records (a row removed or changed) is rewritten record by record from
  the old file, without decoding a single image;
- the converted rows go to new shards, about as full as the split's others;
- once small shards pile up (transforms/plan/refresh.py `compaction_groups`) they are concatenated:
  a TFRecord file is a concatenation of records, and gzip files of gzip members;
- a split's shards are then renumbered `<split>-NNNNN-of-NNNNN`, one name pattern per split
  (what TFDS and the shard glob expect).
"""

import os
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from pipeline.dataset.metadata import ShardInfo
from pipeline.dataset.previous import Previous
from pipeline.dataset.versions import DatasetError
from transforms.manifest.rows import ManifestRow
from transforms.plan.dataset import DatasetPlan
from transforms.plan.refresh import (
    PastRecord,
    RefreshPlan,
    Reuse,
    compaction_groups,
    delta_shards,
    read_rows,
    row_fingerprint,
    row_fingerprints,
    rows_line,
)
from transforms.plan.sharding import ShardId
from transforms.progress import Progress
from transforms.storage import fileio
from transforms.tfrecord.records import ShardFileWriter, read_records, shard_payload
from transforms.write.shard_pieces import join_staged
from transforms.write.shard_writer import INDEX_DIR, ROWS_DIR, ShardResult
from transforms.write.threads import REMOTE_THREADS_PER_CORE

# Recorded options a refresh may differ in: they change no record's bytes.
# (label_offset: ids are inherited, and another offset is refused before any work; preset:
# it changes records only through the options it sets, which are compared themselves.)
FREE_OPTIONS = frozenset(
    (
        "num_shards",
        "target_shard_mb",
        "max_error_rate",
        "freeze_labels",
        "label_map",
        "label_offset",
        "preset",
    )
)


def refreshable(previous: Previous | None, recorded: dict) -> bool:
    """Whether --incremental can reuse the published version; says why not when it cannot."""
    why = (
        why_not_refreshable(previous, recorded) if previous else "there is no published version yet"
    )
    if why:
        print(f"tfrecord-pipeline: --incremental: converting every row: {why}", file=sys.stderr)
    return not why


def why_not_refreshable(previous: Previous, recorded: dict) -> str | None:
    """Why the published version's records cannot be reused by a run with these options."""
    differ = sorted(
        name
        for name in set(recorded) | set(previous.info.options)
        if name not in FREE_OPTIONS and recorded.get(name) != previous.info.options.get(name)
    )
    if differ:
        return f"options that change records differ from the published version's: {differ}"
    if any(not shard.rows for split in previous.info.splits.values() for shard in split.shards):
        return "the published version has no rows files (it was written before refreshes)"
    return None


def fingerprints(rows: list[ManifestRow], cores: int) -> list[str]:
    """Every row's fingerprint: one stat each, or on Cloud Storage a folder's listing for many
    (transforms/plan/refresh.py `row_fingerprints`); on an object store, where a stat or a
    listing is a request, many at once."""
    if not rows or not fileio.is_remote(rows[0].image_uri):
        return list(map(row_fingerprint, rows))
    with ThreadPoolExecutor(cores * REMOTE_THREADS_PER_CORE, "stat") as pool:
        return row_fingerprints(rows, pool.map)


def past_records(previous: Previous) -> Iterator[tuple[str, str, list[PastRecord]]]:
    """(split, shard file, records) of every shard of the published version."""
    for name, split in sorted(previous.info.splits.items()):
        for shard in split.shards:
            path = fileio.join(previous.folder, shard.rows)
            try:
                records = read_rows(fileio.read_text(path))
            except ValueError:
                raise DatasetError(
                    f"{path} is damaged; run without --incremental to convert every row"
                ) from None
            if len(records) != shard.records:
                raise DatasetError(f"{path} does not list the {shard.records} records of its shard")
            yield name, shard.file, records


def delta_plan(plan: DatasetPlan, rows: dict[str, int], previous: Previous) -> DatasetPlan:
    """The plan of the shards that hold the converted rows (`rows`: per split): as full as the
    split's past shards; a split new in this version gets the shards a full conversion would."""
    planned = dict(plan.shards)
    counts = []
    for split, _ in plan.rows:
        past = previous.info.splits.get(split)
        if past is None:
            counts.append((split, planned[split]))
        elif rows.get(split):
            counts.append((split, delta_shards(rows[split], past.examples, len(past.shards))))
    return plan._replace(shards=tuple(counts))


def reuse_shards(
    plan: RefreshPlan, previous: Previous, staging: str, progress: Progress
) -> list[ShardResult]:
    """The kept records of past shards as staged files (names are given later by `assemble`),
    each told to `progress`."""
    shards = {
        shard.file: shard for split in previous.info.splits.values() for shard in split.shards
    }
    compress = previous.info.compression == "gzip"
    results = []
    for reuse in plan.reused:
        result = carry_shard(reuse, shards[reuse.file], previous.folder, staging, compress)
        progress.carried(result.staged, result.records)
        results.append(result)
    return results


def carry_shard(
    reuse: Reuse, shard: ShardInfo, folder: str, staging: str, compress: bool
) -> ShardResult:
    """A past shard's kept records as a staged file of this run: the file itself (linked or
    copied) when every record stays, else its kept records written again."""
    staged = f"{reuse.file}.{os.urandom(16).hex()}"
    kept = reuse.kept()
    target = fileio.join(staging, staged)
    if reuse.keep is None:
        fileio.copy(fileio.join(folder, shard.file), target)
        size, crc = shard.bytes, shard.crc32c
        for suffix, name in (("idx", shard.index), ("rows", shard.rows)):
            if name:
                fileio.copy(fileio.join(folder, name), f"{target}.{suffix}")
    else:
        data = fileio.read_bytes(fileio.join(folder, shard.file))
        writer = ShardFileWriter(fileio.create(target), compress)
        records = read_records(shard_payload(data, "gzip" if compress else "none"))
        for (_, record), keep in zip(records, reuse.keep, strict=True):
            if keep:
                writer.write(record)
        writer.close()
        fileio.sync_file(target)
        size, crc = writer.bytes, writer.crc32c
        if shard.index:
            fileio.write_synced(f"{target}.idx", writer.index_text().encode())
        fileio.write_synced(f"{target}.rows", "".join(map(rows_line, kept)).encode())
    labels = tuple(sorted(Counter(i for record in kept for i in record.label_ids).items()))
    index = "index" if shard.index else ""
    return ShardResult(reuse.split, 0, 0, "", len(kept), size, crc, labels, index, staged, "rows")


def assemble(
    results: list[ShardResult], staging: str, compress: bool
) -> tuple[list[ShardResult], tuple[tuple[str, int], ...]]:
    """Every split's shards (carried ones first, in their old order, then the new ones), small
    ones concatenated, renumbered; and the shard count of each split. The order is the
    results' own, never the order a runner delivered them in."""
    by_split: dict[str, list[ShardResult]] = {}
    for result in sorted(results, key=_assembly_order):
        by_split.setdefault(result.split, []).append(result)
    final, counts = [], []
    for split, parts in sorted(by_split.items()):
        # A new shard whose rows all failed adds nothing but an empty file.
        parts = [part for part in parts if part.records] or parts[:1]
        parts = _compacted(parts, staging, compress)
        counts.append((split, len(parts)))
        for index, part in enumerate(parts):
            name = ShardId(split, index, len(parts)).file_name(compress)
            final.append(
                part._replace(
                    index=index,
                    count=len(parts),
                    file=name,
                    index_file=f"{INDEX_DIR}/{name}.idx" if part.index_file else "",
                    rows_file=f"{ROWS_DIR}/{name}.rows",
                )
            )
    return final, tuple(counts)


def _assembly_order(result: ShardResult) -> tuple[bool, str, int]:
    """Carried shards (no file name yet) first, by their past file's name (their staged name
    starts with it), then new shards by index."""
    carried = not result.file
    return not carried, result.staged if carried else "", result.index


def _compacted(parts: list[ShardResult], staging: str, compress: bool) -> list[ShardResult]:
    groups = compaction_groups([part.records for part in parts])
    merged = {}
    for group in groups:
        members = [parts[i] for i in group]
        merged[group[0]] = join_staged(members, staging, compress)
        fileio.delete([fileio.join(staging, part.staged) for part in members])
    dropped = {index for group in groups for index in group[1:]}
    return [merged.get(index, part) for index, part in enumerate(parts) if index not in dropped]
