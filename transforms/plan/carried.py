"""Archives a refresh carries without reading them (`--incremental`).

A version lists each archive it was converted from in `rows/archives.jsonl`: its path, its
identity when the run looked at it (a local file's size and modification time, an object's
size and CRC-32C: the identity a loose image has, transforms/storage/fileio.py), the rows its
members gave by split, and how many error rows they gave. A refresh carries an archive whose
identity is unchanged and which gave rows and no error row: it is neither listed nor read, its
published records stay, known by their keys (the archive's file name, `#`, the member's path:
transforms/manifest/archives.py), and its rows are counted from its line. Any other archive is
listed, and only its members whose own identity changed are converted again.

An archive whose file name another archive of the run or of the published version has too is
listed: its records' keys would not say which of the two they are of. An archive that gave an
error row is listed, so its error rows are given again, as a loose file's are.
"""

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from tfrecord_pipeline.transforms.archive.members import archive_name
from tfrecord_pipeline.transforms.manifest.rows import ReadConfig

ARCHIVES_FILE = "rows/archives.jsonl"  # in a version, beside its shards' rows files


class ArchiveLine(NamedTuple):
    """One archive a version was converted from, as its archives file lists it."""

    path: str
    identity: str  # when the run looked at it; "" (never carried) when it could not tell
    rows: tuple[tuple[str, int], ...]  # (split, rows its members gave), sorted
    errors: int = 0  # error rows of its members, or of the archive itself

    @property
    def name(self) -> str:
        """Its file name: what its members' keys begin with."""
        return archive_name(self.path)

    def to_json(self) -> str:
        fields = {"path": self.path, "identity": self.identity, "rows": dict(self.rows)}
        return json.dumps({**fields, "errors": self.errors}, sort_keys=True)


class Unread(NamedTuple):
    """The archives a refresh carries unread (transforms/stages.py Job.carried: manifests),
    and what one is read with should a damaged shard make it listed after all."""

    manifests: tuple = ()  # of transforms/manifest/sources.py ManifestFile
    config: ReadConfig | None = None

    @property
    def names(self) -> frozenset[str]:
        """Their file names: what their members' keys begin with."""
        return frozenset(archive_name(manifest.path) for manifest in self.manifests)

    def listed(self, damaged: set[str], unlisted: bool) -> tuple[list, frozenset[str]]:
        """The archives to list after all (those of `damaged`, the file names of archives with
        a record in a damaged shard; every one when a rows file is `unlisted`: its keys are
        not known), and the names of those still carried unread."""
        listed = [m for m in self.manifests if unlisted or archive_name(m.path) in damaged]
        return listed, self.names - {archive_name(manifest.path) for manifest in listed}


NOTHING_UNREAD = Unread()


def archive_lines(
    rows: Iterable[tuple[str, str, int]],
    identities: Mapping[str, str],
    errors: Mapping[str, int],
) -> list[ArchiveLine]:
    """A version's archive lines, by path: from its rows of archives (path, split, rows),
    each archive's identity as the run saw it, and the error rows by the file they came
    from (transforms/write/error_files.py `counted_as`); the lines of archives only, those
    `identities` names."""
    by_path: dict[str, Counter] = {}
    for path, split, count in rows:
        if path in identities:  # not a Parquet file's images
            by_path.setdefault(path, Counter())[split] += count
    return [
        ArchiveLine(
            path, identities.get(path, ""), tuple(sorted(splits.items())), errors.get(path, 0)
        )
        for path, splits in sorted(by_path.items())
    ]


def lines_text(lines: Iterable[ArchiveLine]) -> str:
    return "".join(f"{line.to_json()}\n" for line in lines)


def parse_lines(text: str) -> dict[str, ArchiveLine]:
    """The archive lines of an archives file's text, by path; ValueError when one is not."""
    lines = {}
    for line in text.splitlines():
        fields = json.loads(line)
        rows = tuple(sorted((str(split), int(n)) for split, n in fields["rows"].items()))
        found = ArchiveLine(
            str(fields["path"]), str(fields["identity"]), rows, int(fields["errors"])
        )
        lines[found.path] = found
    return lines


def carried_lines(
    archives: Mapping[str, str], published: Mapping[str, ArchiveLine]
) -> list[ArchiveLine]:
    """The published lines of the archives (path → identity, as this run sees them) a refresh
    carries: unchanged, with rows and no error row, and the only archive of their file name
    in the run and in the published version."""
    names = Counter(map(archive_name, {*archives, *published}))
    return [
        line
        for path, identity in sorted(archives.items())
        if (line := published.get(path)) is not None
        and identity
        and line.identity == identity
        and line.rows
        and not line.errors
        and names[line.name] == 1
    ]


def with_carried(stats, carried: Iterable[ArchiveLine]):
    """The plan's stats (transforms/plan/dataset.py PlanStats) with the rows of the archives a
    refresh carries unread, as their published lines count them: each a label given."""
    rows, archives, given = Counter(dict(stats.rows)), list(stats.archives), 0
    for line in carried:
        for split, count in line.rows:
            rows[split] += count
            archives.append((line.path, split, count))
            given += count
    if not given:
        return stats
    return stats._replace(
        rows=tuple(sorted(rows.items())),
        archives=tuple(sorted(archives)),
        labels_given=stats.labels_given + given,
    )
