"""Class-folder trees: `root/<label>/<image>` or `root/<split>/<label>/<image>` as rows.

A local tree is walked whole by one reader: symlinked folders are followed once each, which takes
one walk that remembers every folder. An object store has no links, so a `gs://` tree is listed
a folder (prefix) at a time, each listing streamed in name order: the listing of a folder yields
its images' rows and its subfolders, and the Beam pipeline lists the subfolders of one level on
many workers at once (transforms/beam/manifests.py). Nobody lists a `gs://` tree whole.
"""

import posixpath
from collections.abc import Iterator
from typing import NamedTuple

from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, UserError
from tfrecord_pipeline.transforms.manifest.fields import record_row
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig, SkippedFile
from tfrecord_pipeline.transforms.storage import disk, fileio, gcs

IMAGE_EXTENSIONS = frozenset(
    [".jpg", ".jpeg", ".jpe", ".png", ".gif", ".bmp", ".tif", ".tiff", ".webp"]
)  # folder trees only; manifests are trusted to list images and checked by content
TREE_DEPTH = 2  # folders listed below a tree's root: <split>/<label>/ holds the deepest images
NO_IMAGES = "no images found in <label>/ or <split>/<label>/ folders"

TreeItem = ManifestRow | ErrorRow | SkippedFile


class TreeFolder(NamedTuple):
    """A folder of tree number `number` still to list."""

    number: int
    root: str  # the tree's root, absolute, without a trailing separator
    relative: str = ""  # the folder under the root, '/'-separated with a trailing '/'; "" the root


def tree_row(root: str, relative: str, number: int, config: ReadConfig) -> TreeItem:
    """A row for `root/<label>/<file>` or `root/<split>/<label>/<file>`, else a SkippedFile."""
    parts = relative.split("/")
    path = fileio.join(root, *parts)
    if len(parts) not in (2, 3) or posixpath.splitext(relative)[1].lower() not in IMAGE_EXTENSIONS:
        return SkippedFile(path)
    fields = {"image_uri": path, "label": parts[-2], "key": relative}
    if len(parts) == 3:
        fields["split"] = parts[0]
    return record_row(fields, None, "", path, number, config)


def unlisted_folder(root: str, folder: disk.Unlisted) -> ErrorRow | SkippedFile:
    """A folder of a tree that was not listed: deeper than any image can be (skipped), or one
    that cannot be listed or was listed already (an error row; with no split, it counts as one
    row in, so the count law holds and the summary shows it)."""
    path = root if folder.path == "." else fileio.join(root, *folder.path.split("/"))
    if folder.error:
        message = f"cannot list the folder: {folder.error}"
        return ErrorRow(folder.path, path, Reason.UNREADABLE_FOLDER, message)
    if folder.same_as:
        message = f"already listed as {folder.same_as} (a symlink loop, or a second link to it)"
        return ErrorRow(folder.path, path, Reason.DUPLICATE_FOLDER, message)
    return SkippedFile(path)


def read_tree(root: str, number: int, config: ReadConfig) -> Iterator[TreeItem]:
    """Every row, error and skipped file of a local tree, in one walk."""
    root = fileio.absolute(root)  # the rows' image paths, wherever the workers run
    for entry in disk.walk(root, TREE_DEPTH):
        if isinstance(entry, disk.Unlisted):
            yield unlisted_folder(root, entry)
        else:
            yield tree_row(root, entry, number, config)


def check_tree(path: str, number: int, config: ReadConfig) -> None:
    """UserError unless the tree holds an image. A local tree is walked until its first image;
    a `gs://` one is only checked to hold an object (its folders are listed on the workers)."""
    if fileio.is_remote(path):
        if not gcs.holds_objects(path):
            raise UserError(f"{path}: {NO_IMAGES}")
        return
    loose = False  # images in the root itself: a class folder named for its parent
    for item in read_tree(path, number, config):
        if isinstance(item, ManifestRow):
            return
        if isinstance(item, ErrorRow) and item.key == ".":
            raise UserError(f"{path}: {item.message}")
        loose = loose or (isinstance(item, SkippedFile) and _an_image_in_the_root(path, item))
    if loose:
        raise UserError(
            f"{path}: {NO_IMAGES}, only in the folder itself: give the folder that holds a "
            "folder per label, or a CSV of image_uri,label"
        )
    raise UserError(f"{path}: {NO_IMAGES}")


def _an_image_in_the_root(root: str, skipped: SkippedFile) -> bool:
    folder, name = posixpath.split(skipped.path)
    same = folder == fileio.absolute(root).rstrip("/")
    return same and posixpath.splitext(name)[1].lower() in IMAGE_EXTENSIONS


def tree_root(path: str, number: int) -> TreeFolder:
    return TreeFolder(number, fileio.absolute(path).rstrip("/"))


def list_folder(folder: TreeFolder, config: ReadConfig) -> Iterator[TreeItem | TreeFolder]:
    """What one folder holds: a local tree's every row at once (its root's listing walks it
    all); in an object store, the rows of the folder's images and its subfolders, to list next
    (below <split>/<label>/ a subfolder is skipped, as a local walk skips it)."""
    if not fileio.is_remote(folder.root):
        yield from read_tree(folder.root, folder.number, config)
        return
    depth = folder.relative.count("/")
    for name, is_folder in gcs.list_folder(f"{folder.root}/{folder.relative}"):
        relative = folder.relative + name
        if not is_folder:
            yield tree_row(folder.root, relative, folder.number, config)
        elif depth < TREE_DEPTH:
            yield folder._replace(relative=f"{relative}/")
        else:
            yield SkippedFile(fileio.join(folder.root, relative))


def read_folders(folder: TreeFolder, config: ReadConfig) -> Iterator[TreeItem]:
    """Every row, error and skipped file under `folder`, listing one folder after another."""
    pending = [folder]
    while pending:
        for item in list_folder(pending.pop(), config):
            if isinstance(item, TreeFolder):
                pending.append(item)
            else:
                yield item
