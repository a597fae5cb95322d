"""A version's files besides its shards, and what each must be: those made from its metadata
and label names (`labels.txt`, TFDS's files), which the commit writes and which must hold
exactly the bytes they make, and the errors files its metadata lists with their sizes and
CRC-32C. `verify` checks them so (pipeline/read/verify.py), and a rollback refuses a version
that fails the same check (pipeline/dataset/rollback.py): one check, so a rollback publishes
nothing verify refuses.

The metadata names none of the made files with a size or checksum but `labels.txt` (its
sha256: the names are not in the metadata, pipeline/dataset/labels_file.py), and needs not: the
other made files' bytes follow from the metadata and the names (a byte compare is the stronger
check). An errors file is named with its size and CRC-32C, checked as a shard's (on Cloud
Storage, without a byte read). A rows file (ShardInfo.rows) is not checked: a refresh, its only
reader, reconverts a shard whose rows file is damaged or gone.
"""

from tfrecord_pipeline.dataset.labels_file import labels_file_names
from tfrecord_pipeline.dataset.metadata import INFO_FILE, LABELS_FILE, DatasetInfo, ErrorFileInfo
from tfrecord_pipeline.dataset.tfds_metadata import tfds_files
from tfrecord_pipeline.transforms.storage import fileio
from tfrecord_pipeline.transforms.storage.file_checks import check_files


def labels_text(info: DatasetInfo, names: list[str]) -> str:
    """The `labels.txt` body: a label name a line, in id order; empty when labels are
    integers (their ids are their own)."""
    if info.labels["kind"] == "integers":
        return ""
    return "".join(f"{name}\n" for name in names)


def made_files(info: DatasetInfo, names: list[str]) -> dict[str, bytes]:
    """Relative path → bytes of every file of a version made from its metadata and its label
    names (or integer ids)."""
    return {LABELS_FILE: labels_text(info, names).encode("utf-8"), **tfds_files(info, names)}


def _read(folder: str, name: str) -> tuple[bytes, list[str]]:
    """A file's bytes, or the problem that it is missing or cannot be read."""
    try:
        return fileio.read_bytes(fileio.join(folder, name)), []
    except fileio.MISSING:
        return b"", [f"{name}: missing"]
    except fileio.READ_ERRORS as error:
        return b"", [f"{name}: cannot be read ({error})"]


def check_file(folder: str, name: str, expected: bytes, difference: str) -> list[str]:
    """A file that must hold exactly `expected`: a problem when it is missing, cannot be read
    or differs (`difference` says how)."""
    data, problems = _read(folder, name)
    return problems or ([] if data == expected else [f"{name}: {difference}"])


def check_error_files(folder: str, listed: list[ErrorFileInfo]) -> list[str]:
    """Problems with the errors files: not stored with the size and CRC-32C their metadata
    gives (all checked at once: one listing on Cloud Storage), or, in a version committed
    before errors files had them, missing, unreadable or not one line per row said."""
    described = [one for one in listed if one.crc32c is not None]
    problems = []
    for one, sound in zip(described, check_files(folder, described), strict=True):
        if not sound and not fileio.exists(fileio.join(folder, one.file)):
            problems.append(f"{one.file}: missing")
        elif not sound:
            problems.append(f"{one.file}: size or CRC-32C differs from {INFO_FILE}")
    for one in (one for one in listed if one.crc32c is None):
        data, unread = _read(folder, one.file)
        rows = data.count(b"\n")
        whole = (rows == one.rows and data.endswith(b"\n")) or (not data and not one.rows)
        if unread:
            problems += unread
        elif not whole:
            problems.append(f"{one.file}: {rows} lines, {INFO_FILE} says {one.rows} rows")
    return problems


def version_file_problems(folder: str, info: DatasetInfo) -> list[str]:
    """Problems with the files of the version in `folder` besides its shards, each led by the
    file's name: `labels.txt` against the count and sha256 in `info` (then not compared again),
    the made files against the bytes `info` and the names make (not when the names cannot be
    read: TFDS's files are made from them), the errors files as `check_error_files` does. A
    version committed before the commit wrote TFDS's files has problems here: TFDS would not
    read it as it is."""
    problems, names, made = [], info.labels.get("names"), {}
    if names is None:
        names, problem = labels_file_names(folder, info.labels)
        problems += [f"{LABELS_FILE}: {problem}"] if problem else []
    if not problems:
        made = made_files(info, names)
        if "names" not in info.labels:
            del made[LABELS_FILE]  # its sha256 matched: the same bytes
    for name, data in made.items():
        problems += check_file(folder, name, data, f"differs from what {INFO_FILE} describes")
    return problems + check_error_files(folder, info.error_files)
