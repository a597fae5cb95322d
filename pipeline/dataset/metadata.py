"""`tfrecord_pipeline.json`: what a converted dataset holds, as typed objects.

Our own name, not TFDS's `dataset_info.json`: that file holds TFDS's own description of the
same dataset (pipeline/dataset/tfds_metadata.py).

Everything in it is a function of the input and the options (no timestamps, no host names), so
two runs of the same conversion write the same bytes here too.
"""

import dataclasses
import hashlib
import json
import math
from collections import Counter
from decimal import Decimal
from fractions import Fraction

from tfrecord_pipeline.transforms.manifest.labels import LabelMap
from tfrecord_pipeline.transforms.plan.dataset import DatasetPlan
from tfrecord_pipeline.transforms.plan.refresh import RefreshCounts
from tfrecord_pipeline.transforms.tfrecord.examples import feature_spec
from tfrecord_pipeline.transforms.write.error_files import ERRORS_DIR, ErrorCounts, ErrorFileResult
from tfrecord_pipeline.transforms.write.formats import ShardFormat
from tfrecord_pipeline.transforms.write.published import ShardInfo
from tfrecord_pipeline.transforms.write.shard_writer import ShardResult

# 2: label names in labels.txt only, described here by their count and the file's sha256;
# 1 listed them here too (`labels.names`), and is still read (pipeline/dataset/labels_file.py).
FORMAT_VERSION = 2
INFO_FILE = "tfrecord_pipeline.json"
LABELS_FILE = "labels.txt"


@dataclasses.dataclass
class ErrorFileInfo:
    file: str  # errors/errors-NNNNN-of-NNNNN.jsonl: one JSON line per rejected row
    rows: int
    # Of the file, as a shard's; None in a version committed before errors files had them.
    bytes: int | None = None
    crc32c: str | None = None


@dataclasses.dataclass
class SplitInfo:
    examples: int
    bytes: int
    errors: int
    label_counts: dict[str, int]  # label id (as JSON object keys are strings) → records
    shards: list[ShardInfo]
    boxes_dropped: int = 0  # detection: boxes with no area inside their image, left out


@dataclasses.dataclass
class DatasetInfo:
    tool_version: str
    options: dict
    features: dict[str, str]  # feature key → dtype
    # Keys of the features that are lists (tf.io.VarLenFeature); every other is one value.
    compression: str  # "gzip": TFRecord shards each one gzip stream
    labels: dict  # labels_entry(): {"kind", "offset", and "count" + "sha256" or "names"}
    rows_in: int
    records: int
    errors: int
    errors_by_reason: dict[str, int]
    skipped_files: int
    splits: dict[str, SplitInfo]
    failures: list[str]  # why the dataset was not committed; empty when it was
    error_files: list[ErrorFileInfo] = dataclasses.field(default_factory=list)
    list_features: list[str] = dataclasses.field(default_factory=list)
    # Detection: images without objects left out (--drop_negatives; not rows in), and boxes
    # dropped from records for having no area inside the image (by split: SplitInfo).
    negatives_dropped: int = 0
    boxes_dropped: int = 0
    format_version: int = FORMAT_VERSION
    # A refresh's version: what it was made of (transforms/plan/refresh.py RefreshCounts); a
    # full conversion's metadata holds no such key.
    refresh: dict | None = None
    file_format: str = "tfrecord"  # or "array_record" (transforms/write/formats.py)

    def shard_format(self) -> ShardFormat:
        """The shards' format, their names saying whether they end in its extension (the
        names `--preset tpu-imagenet` writes do not)."""
        named = ShardFormat(self.file_format, self.compression)
        files = [shard.file for split in self.splits.values() for shard in split.shards]
        plain = files and not any(file.endswith(named.suffix) for file in files)
        return named._replace(extension=not plain)

    def to_json(self) -> str:
        fields = dataclasses.asdict(self)
        if self.refresh is None:
            del fields["refresh"]
        return json.dumps(fields, indent=2, sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "DatasetInfo":
        fields = json.loads(text)
        fields["splits"] = {
            name: SplitInfo(**{**split, "shards": [ShardInfo(**s) for s in split["shards"]]})
            for name, split in fields["splits"].items()
        }
        fields["error_files"] = [ErrorFileInfo(**f) for f in fields.get("error_files", ())]
        return cls(**fields)


def labels_entry(labels: LabelMap) -> dict:
    """The metadata's `labels`. Names are described by their count and the sha256 of the
    `labels.txt` that holds them, so the metadata (read by every reader, refresh and rollback)
    does not carry a vocabulary of up to --max_labels names. Integer ids stay listed (their
    labels.txt is empty): short, as the `label_counts` keys beside them are."""
    if labels.integers:
        return {"kind": "integers", "offset": labels.offset, "names": list(labels.names)}
    digest = hashlib.sha256(labels.to_text().encode("utf-8")).hexdigest()
    return {"kind": "names", "offset": labels.offset, "count": len(labels.names), "sha256": digest}


def label_count(labels: dict) -> int:
    """How many names or ids the metadata's `labels` stand for (a format-1 version lists its
    names)."""
    return labels["count"] if "count" in labels else len(labels["names"])


def _split_info(name: str, results: list[ShardResult], errors: int) -> SplitInfo:
    shards = sorted((r for r in results if r.split == name), key=lambda r: r.index)
    labels: Counter = Counter()
    for shard in shards:
        labels.update(dict(shard.label_counts))
    return SplitInfo(
        examples=sum(s.records for s in shards),
        bytes=sum(s.bytes for s in shards),
        errors=errors,
        label_counts={str(k): v for k, v in sorted(labels.items())},
        boxes_dropped=sum(s.boxes_dropped for s in shards),
        shards=[
            ShardInfo(s.file, s.records, s.bytes, s.crc32c, s.index_file, s.rows_file)
            for s in shards
        ],
    )


def accepting_rate(errors: int, rows: int) -> str:
    """The --max_error_rate, as written, that accepts `errors` of `rows`: the rate rounded up
    to two significant digits (2 of 63, 3.17%, gives 0.032), so it is short to type and lets
    the same rows through, not many more. Exact (fractions, not floats): the float the flag
    parses to is never under the rate the gate computes."""
    rate = Fraction(errors, rows)
    digits = 1
    while rate * 10**digits < 10:
        digits += 1
    rounded = Fraction(math.ceil(rate * 10**digits), 10**digits)
    return f"{Decimal(rounded.numerator) / Decimal(rounded.denominator):f}"


def quality_failures(info: DatasetInfo, max_error_rate: float) -> list[str]:
    """Reasons not to commit: too many rejected rows, or a split with no examples."""
    failures = []
    rate = info.errors / info.rows_in if info.rows_in else 0.0
    if rate > max_error_rate:
        top = ", ".join(f"{r} {n}" for r, n in Counter(info.errors_by_reason).most_common(3))
        failures.append(
            f"{info.errors} of {info.rows_in} rows rejected ({rate:.1%} > --max_error_rate "
            f"{max_error_rate:.1%}); top reasons: {top}; see {ERRORS_DIR}/; to publish "
            f"without them, rerun with --max_error_rate {accepting_rate(info.errors, info.rows_in)}"
        )
    if not info.records:
        failures.append("no records were written")
    failures += [f"split {n!r} has no examples" for n, s in info.splits.items() if not s.examples]
    return failures


def build_info(
    plan: DatasetPlan,
    results: list[ShardResult],
    error_counts: ErrorCounts,
    error_files: list[ErrorFileResult],
    skipped_files: int,
    options: dict,
    tool_version: str,
    max_error_rate: float,
    negatives_dropped: int = 0,
    refresh: RefreshCounts | None = None,
) -> DatasetInfo:
    """The dataset's description, from per-shard and per-file results and the counted errors
    (never the error rows themselves); raises if the count law (rows = records + errors) is
    broken, or if the errors files do not hold every counted error row."""
    errors_by_split = error_counts.by_split()
    spec = feature_spec(
        tuple(tuple(pair) for pair in options.get("features", ())),
        options.get("image_encoding", "jpeg"),
        options.get("multi_label", False),
        plan.detection,
        options.get("masks", False),
    )
    info = DatasetInfo(
        tool_version=tool_version,
        options=options,
        features=spec.dtypes,
        list_features=list(spec.lists),
        compression="gzip" if options.get("compression") == "gzip" else "none",
        labels=labels_entry(plan.labels),
        rows_in=plan.row_count + errors_by_split.get("", 0),
        records=sum(r.records for r in results),
        errors=error_counts.total,
        errors_by_reason=error_counts.by_reason(),
        skipped_files=skipped_files,
        splits={
            name: _split_info(name, results, errors_by_split.get(name, 0))
            for name, _ in plan.shards
        },
        failures=[],
        error_files=[ErrorFileInfo(f.file, f.rows, f.bytes, f.crc32c) for f in sorted(error_files)],
        negatives_dropped=negatives_dropped,
        boxes_dropped=sum(r.boxes_dropped for r in results),
        refresh={**refresh._asdict(), "damaged": list(refresh.damaged)} if refresh else None,
        file_format=options.get("file_format", "tfrecord"),
    )
    if info.rows_in != info.records + info.errors:
        raise AssertionError(f"count law broken: {info.rows_in} rows != {info.records} + errors")
    in_files = sum(f.rows for f in info.error_files)
    if in_files != info.errors:
        raise AssertionError(f"{info.errors} error rows counted, {in_files} in errors files")
    info.failures = quality_failures(info, max_error_rate)
    return info
