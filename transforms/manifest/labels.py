"""Label text to integer id.

String labels get ids in sorted-name order (plus `--label_offset`), so the same label set always
gives the same ids whatever order rows arrive in. `--label_map labels.txt` pins the ids of an
earlier run; a label it lacks is an error row, never a silently appended id. When every label in
the dataset is an integer literal the integers are used as they are; one that int64 (the
record's label type) cannot hold is an error row, never wrapped. Labels that mix integers and
names are refused (`--label_map` makes every label a name): numbered as names, `3` would get an
id other than 3 and count as a class beside `cat`, silently.

A label names a class, so the vocabulary is small beside the rows: a run holds every distinct
label in memory (and writes each into the version's `labels.txt`), so it bounds both what one
label and how many labels it takes. A label over the first bound is an error row (one hostile
cell must not stop a night); a column over the second holds ids, captions or paths, not
classes, and is refused before any image is read (docs/inputs.md#how-many-labels).
"""

import dataclasses
import re
from collections.abc import Collection, Iterable

from tfrecord_pipeline.transforms.errors import Reason, RowError, UserError, shown

_INTEGER = re.compile(r"^-?\d+$")
_INT64 = range(-(1 << 63), 1 << 63)
_INT64_DIGITS = 19
# Characters a label cannot hold: C0 and C1 controls (NUL, tab, line ends, escapes) and the
# Unicode line and paragraph separators. labels.txt holds one label a line, and is read back
# with str.splitlines(), which breaks lines at several of them.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# The longest label, in UTF-8 bytes: class names are short (even a species' full taxonomy, as
# iNaturalist 2021 names its classes, runs to about 100 characters), and a run holds at most
# MAX_LABELS of them unless told otherwise.
MAX_LABEL_BYTES = 256
# Distinct labels a run takes unless `--max_labels` says otherwise: above the largest class
# vocabularies in use (ImageNet-21k 21,841; OpenImages ~20,000; iNaturalist 2021 10,000).
MAX_LABELS = 100_000
# Over this many labels, a run whose labels are nearly one a row is refused unless `--max_labels`
# is given: every row its own class is an id or caption column, not classes to learn.
ONE_A_ROW_FROM = 1_000


def is_integer_label(label: str) -> bool:
    return bool(_INTEGER.match(label))


def fits_int64(label: str) -> bool:
    """Whether an integer label is in int64's range. Digits are counted before converting:
    Python refuses to convert a string of over 4,300 digits."""
    return len(label.lstrip("-0")) <= _INT64_DIGITS and int(label) in _INT64


@dataclasses.dataclass(frozen=True)
class LabelMap:
    """`names[i]` has id `i + offset`; with `integers`, labels are their own ids."""

    names: tuple[str, ...]
    offset: int = 0
    integers: bool = False
    _index: dict = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_index", {name: i for i, name in enumerate(self.names)})

    def id_of(self, label: str) -> int:
        if self.integers:
            if not is_integer_label(label):
                message = f"label {shown(label)} is not an integer, as the dataset's labels are"
                raise RowError(Reason.BAD_LABEL, message)
            if not fits_int64(label):
                message = f"integer label {shown(label, 40)} is outside the int64 range"
                raise RowError(Reason.BAD_LABEL, message)
            return int(label)
        index = self._index.get(label)
        if index is None:
            message = f"label {shown(label)} is not in the label map"
            raise RowError(Reason.UNKNOWN_LABEL, message)
        return index + self.offset

    def to_text(self) -> str:
        """The `labels.txt` body: one name per line, line order is id order."""
        return "".join(f"{name}\n" for name in self.names)


def utf8_size(label: str) -> int:
    """A label's bytes in UTF-8, a lone surrogate (which JSON allows) counted as three."""
    return len(label.encode("utf-8", "surrogatepass"))


def check_label(label: str) -> str:
    label = label.strip()
    if not label:
        raise RowError(Reason.BAD_LABEL, "empty label")
    if control := CONTROL.search(label):
        raise RowError(Reason.BAD_LABEL, f"label holds control character U+{ord(control[0]):04X}")
    if (size := utf8_size(label)) > MAX_LABEL_BYTES:
        raise RowError(
            Reason.BAD_LABEL,
            f"a label of {size:,} bytes ({shown(label, 40)}), over {MAX_LABEL_BYTES}: a label "
            "names a class; is the label column a caption, id or path?",
        )
    return label


def check_label_count(labels: Collection[str], limit: int) -> None:
    """UserError for more than `limit` distinct labels, raised as a run counts them: the
    vocabulary it holds never passes the limit."""
    if len(labels) > limit:
        raise UserError(
            f"column 'label' has over {limit:,} distinct labels: a label names a class "
            "(ImageNet-21k has 21,841); is it an id or caption column? --max_labels N allows "
            "more (docs/inputs.md#how-many-labels)"
        )


def check_vocabulary(distinct: int, given: int, max_labels: int | None) -> None:
    """UserError, unless `--max_labels` was given, when over ONE_A_ROW_FROM labels are nearly
    one a row: over 9 in 10 of the `given` labels (a row's one, or each of its --multi_label
    ones) are of their own."""
    if max_labels is None and distinct > ONE_A_ROW_FROM and distinct * 10 > given * 9:
        raise UserError(
            f"column 'label' has {distinct:,} distinct labels in {given:,} given, nearly one "
            "a row: a label names a class; is it an id or caption column? --max_labels N "
            "allows it (docs/inputs.md#how-many-labels)"
        )


def one_kind(labels: Collection[str]) -> None:
    """UserError when `labels` (each once) hold both integer literals and names, naming two
    of each."""
    integers = sorted(filter(is_integer_label, labels), key=lambda label: (len(label), label))
    names = sorted(set(labels).difference(integers))
    if integers and names:
        raise UserError(
            f"labels mix integer ids ({_examples(integers)}) and names ({_examples(names)}): "
            "use one kind, or give --label_map a file listing every label, one a line (its "
            "id is its line number + --label_offset)"
        )


def _examples(labels: list[str]) -> str:
    return ", ".join(shown(label, 24) for label in labels[:2]) + (", ..." if labels[2:] else "")


def label_map_from_labels(labels: Iterable[str], offset: int = 0) -> LabelMap:
    """Ids for the labels seen in the data: integers as they are, or names in sorted order
    (a mix is a UserError). An integer label outside int64 keeps the labels integers (its
    rows become errors when their id is asked for) but is not listed."""
    distinct = sorted(set(labels))
    one_kind(distinct)
    if distinct and all(is_integer_label(label) for label in distinct):
        ids = sorted(filter(fits_int64, distinct), key=int)
        return LabelMap(tuple(ids), 0, integers=True)
    return LabelMap(tuple(distinct), offset)


def inherited_label_map(past: LabelMap, labels: Iterable[str], frozen: bool) -> LabelMap:
    """A new version's label ids: the published version's, unchanged (a label no row has any
    more keeps its id, so no id is ever reused), then new labels in sorted order after the
    largest id, unless `frozen` (their rows then become `unknown_label` errors). Integer
    labels are their own ids; names where the published labels are integers are `bad_label`
    rows. Labels of this run that mix the kinds are a UserError."""
    labels = set(labels)
    one_kind(labels)
    if past.integers:
        return LabelMap(tuple(sorted(set(past.names) | _integers(labels), key=int)), 0, True)
    known = set(past.names)
    new = () if frozen else tuple(sorted(labels - known))
    return LabelMap(past.names + new, past.offset)


def _integers(labels: Iterable[str]) -> set[str]:
    return {label for label in labels if is_integer_label(label) and fits_int64(label)}


def spelling(label: str) -> str:
    """What a label says, whatever its case and spacing: `Cat`, `cat` and `CAT` spell one."""
    return " ".join(label.split()).casefold()


def alike(names: Iterable[str]) -> list[tuple[str, ...]]:
    """The groups of distinct names that differ only in case or spacing, each sorted, in
    sorted order: each is several classes, which a typo makes as easily as a meaning."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(spelling(name), []).append(name)
    return sorted(tuple(sorted(group)) for group in groups.values() if len(group) > 1)


def parse_label_map(text: str, offset: int = 0, max_labels: int = MAX_LABELS) -> LabelMap:
    """Read a `labels.txt` (one name per line, id = line number + offset), held to the bounds
    a manifest's labels are: at most `max_labels` names of at most MAX_LABEL_BYTES each."""
    names = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not names:
        raise UserError("--label_map: the file lists no labels")
    if len(set(names)) != len(names):
        raise UserError("--label_map: a label is listed twice")
    size, longest = max((utf8_size(name), name) for name in names)
    if size > MAX_LABEL_BYTES:
        raise UserError(f"--label_map: {shown(longest, 40)} is over {MAX_LABEL_BYTES} bytes")
    if len(names) > max_labels:
        raise UserError(f"--label_map: {len(names):,} labels, over --max_labels {max_labels:,}")
    return LabelMap(names, offset)
