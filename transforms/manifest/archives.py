"""An archive's members as manifest rows, by the layouts archives come in.

- Class folders, as in a folder tree: `<label>/<image>` or `<split>/<label>/<image>`, below one
  top folder named as the archive (what `zip -r cats.zip cats/` makes) if it has one. A tar
  inside the archive is a folder named for it: ImageNet's train tar, a tar per synset, gives
  each image its synset as its label.
- Flat: images at the top, labelled by `--ground_truth`'s lines in the order of their names
  (ImageNet's validation tar: transforms/manifest/ground_truth.py). Without it they are
  skipped, and an archive that so gives no row at all is one `flat_archive` error row, which
  the run's summary explains.
- WebDataset: members that share a key (`shard/000123.jpg`, `000123.cls`, `000123.json`) are
  one sample; its label is its `.cls` (an integer id), else its `.txt`, else the field of its
  `.json` that --label_field names; `--feature NAME:TYPE` takes a `.NAME` member's text, or the
  JSON's field.

A row without a split of its own takes the one its archive's file name says, a word of it
(split at `_`, `-`, `.`) being `train`, `val` or `validation` (both `validation`, as the TPU
readers name it) or `test`: ILSVRC2012_img_train.tar's rows are `train`, ILSVRC2012_img_val.tar's
`validation`; a name with none, or two, says none.

Each row's image is `<archive>#<member>`, its key `<archive's file name>#<member>` (members.py
`member_key`), and it carries where its bytes are (`Member`): one ranged read, no listing.
"""

import itertools
import json
import re
from collections.abc import Iterable, Iterator

from tfrecord_pipeline.transforms.archive.kinds import read_entries
from tfrecord_pipeline.transforms.archive.members import (
    Entry,
    Refused,
    archive_name,
    listed_identity,
    member_key,
    read_member,
)
from tfrecord_pipeline.transforms.archive.unpack import Unpacked
from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, RowError
from tfrecord_pipeline.transforms.manifest.fields import record_row
from tfrecord_pipeline.transforms.manifest.ground_truth import mismatch, read_ground_truth
from tfrecord_pipeline.transforms.manifest.rows import (
    ManifestRow,
    ReadConfig,
    SkippedFile,
)
from tfrecord_pipeline.transforms.manifest.trees import IMAGE_EXTENSIONS, TreeItem
from tfrecord_pipeline.transforms.storage import fileio

SIDECARS = (".cls", ".txt", ".json")  # a WebDataset sample's label, in the order looked for
SIDECAR_BYTES = 1 << 20  # a label or feature member larger than this is not read
SPLIT_WORDS = {"train": "train", "val": "validation", "validation": "validation", "test": "test"}
FLAT = (
    "{count:,} images at its top and no class folders: give their labels, one a line in the "
    "order of their names, with --ground_truth FILE (docs/inputs.md#archives)"
)


class Archive:
    """One archive being read into rows: its path (absolute), its place among the manifests;
    `read` reads a member's bytes (a compressed tar's from the file it is unpacked into)."""

    def __init__(self, path: str, number: int, size: int, config: ReadConfig, read=read_member):
        self.path, self.number, self.config, self.read = path, number, config, read
        self.kept = (size, config.keep_order) if config.keep_order else ()
        self.wanted = {*SIDECARS, *(f".{column}" for column, _ in config.features)}
        # Kept in order, two members of one name may go to two shards, where no shard writer
        # sees both: the second is told here (mixed, they meet in one shard, as keys do).
        self.seen: set[str] = set()
        self.listed = listed_identity(path)
        self.name = archive_name(path)
        stem = self.name.split(".")[0]
        self.top = f"{stem}/"  # a top folder named as the archive is not a label
        self.split = named_split(self.name)

    def rows(self, entries: Iterable[Entry | Refused]) -> Iterator[TreeItem]:
        flat: list[Entry] = []  # images at the top, labelled once all are known
        given = False  # whether the archive gave a row or an error row
        for _, group in itertools.groupby(entries, key=_sample_key):
            for item in self._sample(list(group), flat):
                given = given or not isinstance(item, SkippedFile)
                yield item
        yield from self._flat(flat, given)

    def _sample(self, group: list[Entry | Refused], flat: list[Entry]) -> Iterator[TreeItem]:
        if isinstance(group[0], Refused):
            yield self._refused(group[0])
            return
        suffixes = [_suffix(entry.name) for entry in group]
        images = [
            e for e, suffix in zip(group, suffixes, strict=True) if suffix in IMAGE_EXTENSIONS
        ]
        sidecars = {
            suffix: e for e, suffix in zip(group, suffixes, strict=True) if suffix in self.wanted
        }
        labelled = images and not sidecars.keys().isdisjoint(SIDECARS)
        for entry in group:
            if entry not in images and not (labelled and entry in sidecars.values()):
                yield SkippedFile(self.uri(entry))
        for image in images:
            if labelled:
                yield self._sample_row(image, sidecars)
            elif "/" not in image.name.removeprefix(self.top):
                flat.append(image)
            else:
                yield self._folder_row(image)

    def _flat(self, flat: list[Entry], given: bool) -> Iterator[TreeItem]:
        """The rows of the images at the top, labelled by --ground_truth's lines in the order
        of their names; without it, skipped files (and, if the archive gave nothing else, one
        `flat_archive` error row saying why it gave no rows)."""
        if not flat:
            return
        if not self.config.ground_truth:
            yield from (SkippedFile(self.uri(entry)) for entry in flat)
            if not given:
                message = FLAT.format(count=len(flat))
                yield ErrorRow(self.name, self.path, Reason.FLAT_ARCHIVE, message)
            return
        labels = read_ground_truth(self.config.ground_truth)
        flat.sort(key=lambda entry: entry.name)
        if len(labels) != len(flat):
            for entry in flat:
                key, uri = self.key(entry), self.uri(entry)
                yield mismatch(key, uri, len(labels), len(flat), self.name, self.split)
            return
        for entry, label in zip(flat, labels, strict=True):
            yield self._row(entry, {"label": label})

    def uri(self, entry: Entry | Refused) -> str:
        return member_key(self.path, entry.held_as) if entry.held_as else self.path

    def key(self, entry: Entry) -> str:
        return member_key(self.name, entry.name)

    def _refused(self, refused: Refused) -> ErrorRow:
        key = member_key(self.name, refused.held_as) if refused.held_as else self.name
        return ErrorRow(key, self.uri(refused), refused.reason, refused.message)

    def _row(self, entry: Entry, fields: dict) -> TreeItem:
        fields.update(image_uri=self.uri(entry), key=self.key(entry))
        if self.split:
            fields.setdefault("split", self.split)
        if self.kept:
            if fields["key"] in self.seen:
                message = "a second member of this name in the archive: the first is converted"
                return ErrorRow(fields["key"], fields["image_uri"], Reason.DUPLICATE_KEY, message)
            self.seen.add(fields["key"])
        # Placed by offset, as a CSV's records are: the first of two with one key is the first.
        row = record_row(fields, entry.member.offset, "", self.path, self.number, self.config)
        if not isinstance(row, ManifestRow):  # an error row: of the member, not the archive
            return row._replace(source=fields["image_uri"]) if isinstance(row, ErrorRow) else row
        in_place = entry.member.container == self.path  # not a staged copy (unpack.py)
        member = entry.member._replace(listed=self.listed if in_place else "", kept=self.kept)
        return row._replace(member=member)

    def _folder_row(self, entry: Entry) -> TreeItem:
        parts = entry.name.removeprefix(self.top).split("/")
        if len(parts) not in (2, 3):
            return SkippedFile(self.uri(entry))
        fields = {"label": parts[-2]}
        if len(parts) == 3:
            fields["split"] = parts[0]
        return self._row(entry, fields)

    def _sample_row(self, entry: Entry, sidecars: dict[str, Entry]) -> TreeItem:
        """A WebDataset sample's row: its label and features from its other members."""
        try:
            texts = {suffix: self._text(e) for suffix, e in sidecars.items()}
            fields = _sidecar_fields(texts, self.config)
        except RowError as error:
            return ErrorRow(self.key(entry), self.uri(entry), error.reason, error.message)
        return self._row(entry, fields)

    def _text(self, entry: Entry) -> str:
        """A label or feature member's text: the bytes the listing read as it passed them (a
        tar's), else one read of its own."""
        data = entry.data
        if data is None or len(data) != entry.member.size:
            data = self.read(entry.member, self.uri(entry), SIDECAR_BYTES)
        return data.decode("utf-8", "replace")

    def keeps(self, name: str, size: int) -> bool:
        """Whether the listing reads a member's bytes as it passes it (tars.py `Keep`): a
        sample's label or feature member, small enough."""
        return size <= SIDECAR_BYTES and _suffix(name) in self.wanted


def _sidecar_fields(texts: dict[str, str], config: ReadConfig) -> dict:
    """A sample's label and --feature values from the texts of its members by suffix."""
    document = {}
    if ".json" in texts:
        try:
            document = json.loads(texts[".json"])
        except ValueError:
            raise RowError(Reason.BAD_ROW, "its .json member is not JSON") from None
    document = document if isinstance(document, dict) else {}
    fields: dict = {}
    label = next((texts[suffix].strip() for suffix in (".cls", ".txt") if suffix in texts), None)
    if label is not None:
        fields["label"] = label
    elif config.label_field in document:
        fields["label"] = document[config.label_field]
    for column, _ in config.features:
        value = texts.get(f".{column}", document.get(column))
        if value is not None:
            fields[column] = value.strip() if isinstance(value, str) else value
    return fields


def named_split(name: str) -> str:
    """The split an archive's file name says (see the module's docstring), else ""."""
    words = re.split(r"[-_.]", name.lower())
    said = {SPLIT_WORDS[word] for word in words if word in SPLIT_WORDS}
    return said.pop() if len(said) == 1 else ""


def _suffix(name: str) -> str:
    """posixpath.splitext's extension, lower-cased, without its generic steps (twice a member)."""
    base = name[name.rfind("/") + 1 :]
    dot = base.rfind(".")
    return base[dot:].lower() if dot > 0 and base[:dot].lstrip(".") else ""


def _sample_key(item: Entry | Refused) -> object:
    """A WebDataset sample's key: the member's folder and its name up to the first dot; a
    refused member is a group of its own."""
    if isinstance(item, Refused):
        return object()  # equal to no other
    cut = item.name.rfind("/") + 1
    folder = item.name[:cut].rstrip("/") or item.name[:cut]  # as posixpath.split's
    return (folder, item.name[cut:].partition(".")[0])


def read_archive(path: str, number: int, size: int, config: ReadConfig) -> Iterator[TreeItem]:
    """Every row, error row and skipped file of the archive at `path`, of `size` bytes when
    the launcher looked, listed in one pass: a compressed tar unpacked into the run's staging
    folder as it is, and so a tar on an object store kept in order (--archive_order keep), whose
    bytes the listing reads whole anyway: its shards' runs then read the staged copy, and the
    archive is read once."""
    path = fileio.absolute(path)
    if not config.unpack_to:
        archive = Archive(path, number, size, config)
        yield from archive.rows(read_entries(path, keep=archive.keeps, size=size or None))
        return
    spool = bool(config.keep_order) and fileio.is_remote(path)
    with Unpacked(config.unpack_to, path, config.max_file_bytes) as unpacked:
        archive = Archive(path, number, size, config, unpacked.read)
        yield from archive.rows(read_entries(path, unpacked, archive.keeps, spool, size or None))
