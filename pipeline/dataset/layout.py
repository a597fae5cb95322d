"""What a dataset root is: a folder is one by its own layout alone (`LATEST`, `versions/`),
never by a bare `_staging/`; on a local disk the layout holds no symbolic links, and what a run
deletes is the layout's own: nothing outside the root is ever deleted, moved or written.

A link where the layout has a file or folder (`LATEST`, `versions/`, `_staging/`, `_published/`,
a version or staging folder) would lead a run's writes and its clean-up into another folder,
even another dataset: `check_layout` refuses it with one line, and a deletion checks each name
below the root with lstat and leaves a link where it is, never following it. (`.lock` is only
ever opened to be locked, never written: it may lead to a file elsewhere, but not nowhere.)
Object stores have no links; there the checks pass.
"""

import contextlib
import os
import stat

from tfrecord_pipeline.dataset.versions import (
    LEASE,
    LOCK,
    MARKER,
    POINTER,
    PUBLISHED,
    STAGING,
    VERSIONS,
)
from tfrecord_pipeline.transforms.errors import UserError
from tfrecord_pipeline.transforms.storage import fileio, gcs

TEMPORARY = f"{POINTER}.tmp-"  # a pointer's write in progress, or one a kill cut short
_OURS = (POINTER, VERSIONS, STAGING, PUBLISHED, LOCK, LEASE)
_FILES = (POINTER,)
_FOLDERS = (VERSIONS, STAGING, PUBLISHED)


def make_layout(root: str) -> tuple[str, ...]:
    """The `versions/` folder, before any staging: a folder is a dataset by its layout alone,
    so a first run killed early leaves a dataset its rerun recognises. On a store, an empty
    placeholder object stands for the folder, as the console makes one. Returns what it made,
    the deepest first (`versions/`, then the root and its parents when they were not there),
    for `unmake_layout`."""
    folder = fileio.join(root, VERSIONS)
    if fileio.is_remote(root):
        gcs.write(folder + "/", b"")
        return (folder + "/",)
    made, missing = [folder], os.path.abspath(root)
    while not os.path.exists(missing):
        made.append(missing)
        missing = os.path.dirname(missing)
    os.makedirs(folder, exist_ok=True)
    return tuple(made)


def unmake_layout(root: str, made: tuple[str, ...]) -> None:
    """Undo `make_layout` for a run that stopped at a mistake before it wrote anything else:
    a new or empty --output is left as it was. Only what is still empty goes (a folder by
    rmdir, which refuses one that holds anything; the store's placeholder only while the root
    holds nothing else), so a run that started into the same root meanwhile loses nothing."""
    if not made:
        return
    if fileio.is_remote(root):
        if fileio.names_in(root) == [VERSIONS]:
            fileio.delete(list(made))
        return
    for folder in (fileio.join(root, STAGING), *made):  # staging: left empty by some runs
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def refuse_foreign(root: str, names: list[str]) -> None:
    """Raise UserError unless `names`, what `root` holds, are those of a dataset's layout, or
    none: a folder that is not one of this tool's datasets is never written into."""
    foreign = [name for name in names if name not in _OURS and not name.startswith(TEMPORARY)]
    if not foreign:
        if names and POINTER not in names and VERSIONS not in names:
            raise UserError(
                f"{root} is not a tfrecord-pipeline dataset: it holds {', '.join(names)} but no "
                f"{POINTER} or {VERSIONS}/; name a new or empty folder for --output"
            )
        return
    parent = root.rstrip("/").replace("\\", "/").split("/")[-2:-1]
    if MARKER in foreign and parent == [VERSIONS]:
        raise UserError(f"{root} is a version of a dataset; --output names the dataset's root")
    if MARKER in foreign:
        raise UserError(
            f"{root} holds a dataset in the single-folder layout of tfrecord-pipeline 0.1; "
            "convert into a new --output folder (nothing in that one is changed)"
        )
    shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
    raise UserError(
        f"{root} is not empty and is not a tfrecord-pipeline dataset (it holds {shown}); "
        "name a new or empty folder for --output"
    )


def refuse_nested(root: str) -> None:
    """Raise UserError if `root` lies in another dataset's layout (its `versions/`,
    `_staging/` or `_published/`): a run there would change a published version's folder.
    A folder named `versions` is a dataset's only beside a `LATEST` (a folder of datasets may
    well be called so)."""
    if fileio.is_remote(root):
        return
    path = os.path.abspath(root)
    while os.path.dirname(path) != path:
        parent, name = os.path.split(path)
        marks = (POINTER,) if name == VERSIONS else (POINTER, VERSIONS)
        if name in _FOLDERS and any(os.path.lexists(os.path.join(parent, m)) for m in marks):
            raise UserError(f"{root} is inside the dataset {parent}; name a folder outside it")
        path = parent


def check_layout(root: str) -> None:
    """Raise UserError if a name of `root`'s layout, a version or staging folder, or a
    pointer's temporary file is a symbolic link or not the kind of entry the layout expects."""
    if fileio.is_remote(root):
        return
    check_lock(root)
    for name in (*_FILES, *_FOLDERS):
        path = os.path.join(root, name)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):  # none, or no root
            _check_entry(path, os.lstat(path).st_mode, folder=name in _FOLDERS)
    for name in (VERSIONS, STAGING):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for entry in os.scandir(os.path.join(root, name)):
                if entry.is_symlink():
                    _check_entry(entry.path, stat.S_IFLNK, folder=True)
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):  # one deleted meanwhile
        for entry in os.scandir(root):  # a publication deletes these: files, never followed
            if entry.name.startswith(TEMPORARY) and not entry.is_file(follow_symlinks=False):
                _check_entry(entry.path, entry.stat(follow_symlinks=False).st_mode, folder=False)


def check_lock(root: str) -> None:
    """Raise UserError if the local lock file is a link that leads nowhere: opening it would
    make a file where it leads."""
    lock = os.path.join(root, LOCK)
    if os.path.islink(lock) and not os.path.exists(lock):
        raise UserError(f"{lock} is a symbolic link that leads nowhere; remove the link")


def _check_entry(path: str, mode: int, folder: bool) -> None:
    if stat.S_ISLNK(mode):
        raise UserError(
            f"{path} is a symbolic link: a dataset's layout holds none, and a run never "
            "follows one; remove the link"
        )
    if folder and not stat.S_ISDIR(mode):
        raise UserError(f"{path} is not a folder, as a dataset's layout has it")
    if not folder and not stat.S_ISREG(mode):
        raise UserError(f"{path} is not a file, as a dataset's layout has it")


def own_folder(root: str, *names: str) -> bool:
    """Whether root/names... is a folder reached without a link (each name checked with
    lstat); a store's prefix always is."""
    if fileio.is_remote(root):
        return True
    path = root
    for name in names:
        path = os.path.join(path, name)
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):  # a link, a file, ...
                return False
        except FileNotFoundError:
            return False
    return True


def folders_in(root: str, name: str) -> list[str]:
    """The names in root/name (`versions/`, `_staging/`, `_published/`), sorted; none when it
    is a link. A link among them is listed too: deleting it goes through `delete_folder`,
    which leaves it."""
    return fileio.names_in(fileio.join(root, name)) if own_folder(root, name) else []


def delete_folder(root: str, parent: str, name: str) -> None:
    """Delete the folder root/parent/name and what it holds, unless a link stands on the way
    (then nothing is deleted: what the link leads to is not the dataset's). Below it, the
    deletion unlinks a link and never descends through it (shutil.rmtree)."""
    if own_folder(root, parent, name):
        fileio.delete_tree(fileio.join(root, parent, name))


def delete_version(root: str, version: str) -> None:
    """Delete a version folder, its marker first: a version half deleted is never taken for a
    complete one."""
    if not own_folder(root, VERSIONS, version):
        return
    fileio.delete([fileio.join(root, VERSIONS, version, MARKER)])
    delete_folder(root, VERSIONS, version)
