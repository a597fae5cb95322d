"""Label text to integer id.

String labels get ids in sorted-name order (plus `--label_offset`), so the same label set always
gives the same ids whatever order rows arrive in. `--label_map labels.txt` pins the ids of an
earlier run; a label it lacks is an error row, never a silently appended id. When every label in
the dataset is an integer literal the integers are used as they are.
"""

import dataclasses
import re
from collections.abc import Iterable

from transforms.errors import Reason, RowError, UserError

_INTEGER = re.compile(r"^-?\d+$")


def is_integer_label(label: str) -> bool:
    return bool(_INTEGER.match(label))


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
            return int(label)
        index = self._index.get(label)
        if index is None:
            raise RowError(Reason.UNKNOWN_LABEL, f"label {label!r} is not in the label map")
        return index + self.offset

    def to_text(self) -> str:
        """The `labels.txt` body: one name per line, line order is id order."""
        return "".join(f"{name}\n" for name in self.names)


def check_label(label: str) -> str:
    label = label.strip()
    if not label:
        raise RowError(Reason.BAD_LABEL, "empty label")
    return label


def label_map_from_labels(labels: Iterable[str], offset: int = 0) -> LabelMap:
    """Ids for the labels seen in the data: integers as they are, or names in sorted order."""
    distinct = sorted(set(labels))
    if distinct and all(is_integer_label(label) for label in distinct):
        return LabelMap(tuple(sorted(distinct, key=int)), 0, integers=True)
    return LabelMap(tuple(distinct), offset)


def parse_label_map(text: str, offset: int = 0) -> LabelMap:
    """Read a `labels.txt` (one name per line, id = line number + offset)."""
    names = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not names:
        raise UserError("--label_map: the file lists no labels")
    if len(set(names)) != len(names):
        raise UserError("--label_map: a label is listed twice")
    return LabelMap(names, offset)
