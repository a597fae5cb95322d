"""The archives benchmarks/archives.py and archive_requests.py convert, made from the benchmark
corpus's images (benchmarks/corpus.py) with the standard library's `tarfile`, as the project's
own environment must; where .venv-peers exists, archives.py makes the WebDataset shards with
webdataset.TarWriter instead (benchmarks/archive_peers.py), byte for byte the same layout.

- one tar of class folders: `label/000123.jpg`, the layout `tar cf images.tar */`;
- WebDataset shards of SHARD_IMAGES samples: `000123.jpg` and `000123.cls` (the label's id);
- a tar of a given size: the corpus's images over and over, each made distinct by a JPEG
  comment segment (COM) holding its number, so no two members have the same bytes.
"""

import io
import struct
import tarfile
from collections.abc import Iterator
from pathlib import Path

from archive_peers import SHARD_IMAGES, label_ids, manifest_rows

COMMENT = b"\xff\xfe"  # a JPEG COM marker: a segment decoders skip


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def class_folder_tar(manifest: Path, path: Path, rows: slice = slice(None)) -> Path:
    """One tar of the manifest's images (`rows` of them), each under its label's folder."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as archive:
        for image, label in manifest_rows(str(manifest))[rows]:
            _add(archive, f"{label}/{Path(image).name}", Path(image).read_bytes())
    return path


def class_folder_tars(manifest: Path, folder: Path, per_tar: int = SHARD_IMAGES) -> Path:
    """A folder of class-folder tars of `per_tar` of the manifest's images each."""
    folder.mkdir(parents=True, exist_ok=True)
    count = len(manifest_rows(str(manifest)))
    for start in range(0, count, per_tar):
        tar = folder / f"part-{start // per_tar:06d}.tar"
        class_folder_tar(manifest, tar, slice(start, start + per_tar))
    return folder


def webdataset_shards(manifest: Path, folder: Path) -> Path:
    """A folder of WebDataset shards of the manifest's images, SHARD_IMAGES samples each."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = manifest_rows(str(manifest))
    ids = label_ids(label for _, label in rows)
    for start in range(0, len(rows), SHARD_IMAGES):
        shard = folder / f"shard-{start // SHARD_IMAGES:06d}.tar"
        with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as archive:
            for image, label in rows[start : start + SHARD_IMAGES]:
                key = Path(image).stem
                _add(archive, f"{key}.jpg", Path(image).read_bytes())
                _add(archive, f"{key}.cls", str(ids[label]).encode())
    return folder


def class_folders(manifest: Path, folder: Path) -> Path:
    """The manifest's images as loose files, each under its label's folder: what the tars hold,
    unpacked."""
    for image, label in manifest_rows(str(manifest)):
        (folder / label).mkdir(parents=True, exist_ok=True)
        (folder / label / Path(image).name).write_bytes(Path(image).read_bytes())
    return folder


def distinct(jpeg: bytes, number: int) -> bytes:
    """The JPEG with a comment segment holding `number` after its SOI: other bytes, the same
    image."""
    text = f"copy {number}".encode()
    return jpeg[:2] + COMMENT + struct.pack(">H", len(text) + 2) + text + jpeg[2:]


def _copies(manifest: Path) -> Iterator[tuple[str, bytes]]:
    rows = [(label, Path(image).read_bytes()) for image, label in manifest_rows(str(manifest))]
    number = 0
    while True:
        for label, jpeg in rows:
            yield f"{label}/{number:08d}.jpg", distinct(jpeg, number)
            number += 1


def sized_tar(manifest: Path, path: Path, size_bytes: int) -> int:
    """A class-folder tar of at least `size_bytes`, of distinct copies of the manifest's images;
    the images it holds."""
    images, written = 0, 0
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as archive:
        for name, data in _copies(manifest):
            if written >= size_bytes:
                break
            _add(archive, name, data)
            images, written = images + 1, written + tarfile.BLOCKSIZE + len(data)
    return images
