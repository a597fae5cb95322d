"""Reason codes, the per-row error type, and the exception types for user mistakes and faults.

A row that cannot become a record is data, not a crash: it travels through the pipeline as an
`ErrorRow` and lands in `errors/` with a stable reason code, so `rows in = records out + errors`
always holds and a bad file never kills a worker.
"""

import enum
import json
from typing import NamedTuple


class UserError(Exception):
    """A mistake the user can fix (bad flag, unreadable manifest); printed as one line."""


class FaultError(Exception):
    """A failure the run cannot survive and a rerun usually can: not the input's or the code's
    (a shard-writer process killed, another run committing the same output). Its message names
    the cause and what to do; the command prints it as one line and exits with status 3."""


class Reason(str, enum.Enum):
    """Why a row was rejected. The values are written to `errors/` and must stay stable. A str
    whose str() is its value, made by hand: the standard library's own such enum needs Python
    3.11, and TPU VMs ship 3.10."""

    def __str__(self) -> str:
        return self.value

    BAD_ROW = "bad_row"  # a line that does not parse (bad or deep JSON, not UTF-8, a quoted
    # newline in CSV, over 1 MiB), a missing/NUL image_uri, a Parquet row group not decodable
    BAD_LABEL = "bad_label"  # empty, a control character, or an integer id outside int64
    UNKNOWN_LABEL = "unknown_label"  # label absent from --label_map
    BAD_SPLIT = "bad_split"  # split name unusable in a file name
    BAD_FEATURE = "bad_feature"  # a --feature column value of the wrong type
    BAD_ANNOTATION = "bad_annotation"  # an object's box, label, is_crowd or area unusable, or
    # boxes drawn on an image of another size than the file
    DUPLICATE_KEY = "duplicate_key"  # a second row with a key already seen
    DUPLICATE_CONTENT = "duplicate_content"  # with --dedup: same file bytes as an earlier row
    MISSING_FILE = "missing_file"
    UNREADABLE_FILE = "unreadable_file"  # refused: permission denied, or another answer
    UNAVAILABLE_FILE = "unavailable_file"  # an object still failing after its read's retries
    NOT_A_FILE = "not_a_file"  # a FIFO, socket, device or folder: never opened for reading
    FILE_TOO_LARGE = "file_too_large"  # over --max_file_mb: never read whole
    UNREADABLE_FOLDER = "unreadable_folder"  # a class-folder tree's folder that cannot be listed
    DUPLICATE_FOLDER = "duplicate_folder"  # a tree folder met again: a link loop, or two links
    EMPTY_FILE = "empty_file"
    NOT_AN_IMAGE = "not_an_image"
    CORRUPT_IMAGE = "corrupt_image"  # truncated or malformed image data
    UNSUPPORTED_FORMAT = "unsupported_format"
    IMAGE_TOO_LARGE = "image_too_large"  # over the pixel or decode-memory limit (a bomb)
    TOO_MANY_SCANS = "too_many_scans"  # a JPEG of more scans than --max_scans (slow to decode)
    TOO_MANY_MARKERS = "too_many_markers"  # a JPEG of over 65,536 marker and fill bytes outside
    # its scans (millions of empty segments: slow to walk, a huge record)
    TOO_COMPRESSED = "too_compressed"  # a JPEG frame of more pixels for its scan data than
    # --max_pixels_per_byte (a few bytes that decode into hundreds of MB)
    TOO_MUCH_METADATA = "too_much_metadata"  # a JPEG of more APPn, COM and after-EOI bytes than
    # --max_metadata_mb (a small photo stored as a huge record)
    RECORD_TOO_LARGE = "record_too_large"  # over TensorFlow's record size limit
    # Archives (docs/inputs.md#archives): a member, or the rest of an archive, not read.
    CORRUPT_ARCHIVE = "corrupt_archive"  # not a tar or zip, a header unreadable, cut short,
    # or a zip member that does not inflate to its declared size and CRC-32 (a lying bomb)
    UNSAFE_MEMBER = "unsafe_member"  # a name that leaves the archive: absolute, or with `..`
    BAD_MEMBER_NAME = "bad_member_name"  # a member name that is not UTF-8
    ENCRYPTED_MEMBER = "encrypted_member"
    UNSUPPORTED_MEMBER = "unsupported_member"  # a zip method but stored/deflate; a sparse tar file
    OVERLAPPING_MEMBER = "overlapping_member"  # a zip member over the bytes of the one before
    NESTED_TOO_DEEP = "nested_too_deep"  # a tar inside tars deeper than the limit
    CHANGED_ARCHIVE = "changed_archive"  # rewritten between its listing and a member's read
    FLAT_ARCHIVE = "flat_archive"  # an archive of images at its top and no class folders, and
    # no --ground_truth: it gave no rows (one error row for the archive; its images are skipped)
    GROUND_TRUTH_MISMATCH = "ground_truth_mismatch"  # a flat archive's image, when --ground_truth
    # has more or fewer lines than the archive has images at its top


def shown(value: object, limit: int = 80) -> str:
    """`repr(value)` for a message, cut to `limit` characters: a message names a value, the
    error row's fields hold it whole."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def beams_original(error: BaseException) -> BaseException:
    """The exception a Beam step raised, rather than the copy Beam re-raises with the step's
    name appended to its text (`[while running 'PlanDataset/DecideShards']`): a message names
    the cause, not the step. Beam raises its copy while handling the original."""
    original = error.__context__
    if type(original) is type(error) and str(error).startswith(str(original)):
        return original
    return error


class RowError(Exception):
    """Raised by the pure per-row functions; the DoFns turn it into an `ErrorRow`."""

    def __init__(self, reason: Reason, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def bad_annotation(message: str) -> RowError:
    """A detection row's objects are not usable as given (`Reason.BAD_ANNOTATION`)."""
    return RowError(Reason.BAD_ANNOTATION, message)


class ErrorRow(NamedTuple):
    """A rejected row: where it came from, what it said, and why it was rejected."""

    key: str
    source: str  # "<manifest>@<byte offset>", "<manifest>#<Parquet row>", or a tree's image path
    reason: Reason
    message: str
    row: tuple[tuple[str, str], ...] = ()  # the row's fields as read
    split: str = ""  # known once the row was parsed

    def to_json(self) -> str:
        return json.dumps(
            {
                "key": self.key,
                "source": self.source,
                "reason": self.reason.value,
                "message": self.message,
                "row": dict(self.row),
                "split": self.split,
            },
            ensure_ascii=False,
            sort_keys=True,
        )

    def sort_key(self) -> tuple:
        return (self.source, self.key, self.reason.value)
