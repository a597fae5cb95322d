"""Archives the tests read, made here with `tarfile` from the photos in sample/photos (never
downloaded): ImageNet's two official tars in miniature, and WebDataset shards."""

import io
import json
import random
import tarfile
from pathlib import Path

from conftest import crop, encode, photo

SYNSETS = ("n01440764", "n01443537", "n01484850")  # the first three of ImageNet's sorted synsets
SOURCES = ("astronaut.png", "chelsea.png", "coffee.png")
MTIME = 1_700_000_000  # fixed, so a rewritten archive's members are the same members


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644, owner: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), MTIME, mode
    info.uname = info.gname = owner
    tar.addfile(info, io.BytesIO(data))


def _jpegs(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [encode(crop(photo(SOURCES[i % 3]), rng, 64), quality=85) for i in range(count)]


def imagenet_tars(folder: Path, per_synset: int = 3, validation: int = 5) -> dict[str, Path]:
    """ILSVRC2012_img_train.tar (a tar of a tar per synset, `<synset>.tar` holding
    `<synset>_<n>.JPEG`, as the official one is laid out), ILSVRC2012_img_val.tar (flat
    `ILSVRC2012_val_<8 digits>.JPEG`) and synset_labels.txt (the validation images' synsets,
    one a line in the order of their names, as tensorflow/tpu's imagenet_to_gcs.py reads it)."""
    folder.mkdir(parents=True, exist_ok=True)
    train = folder / "ILSVRC2012_img_train.tar"
    with tarfile.open(train, "w", format=tarfile.GNU_FORMAT) as outer:
        for number, synset in enumerate(SYNSETS):
            inner = io.BytesIO()
            with tarfile.open(fileobj=inner, mode="w", format=tarfile.GNU_FORMAT) as tar:
                for index, data in enumerate(_jpegs(per_synset, number), start=1):
                    _add(tar, f"{synset}_{index}.JPEG", data)
            _add(outer, f"{synset}.tar", inner.getvalue())
    val = folder / "ILSVRC2012_img_val.tar"
    synsets = [SYNSETS[(index * 2) % 3] for index in range(validation)]
    with tarfile.open(val, "w", format=tarfile.GNU_FORMAT) as tar:
        for index, data in enumerate(_jpegs(validation, 99), start=1):
            _add(tar, f"ILSVRC2012_val_{index:08d}.JPEG", data)
    labels = folder / "synset_labels.txt"
    labels.write_text("".join(f"{synset}\n" for synset in synsets))
    return {"train": train, "validation": val, "ground_truth": labels}


def webdataset_shard(path: Path, samples: list[dict]) -> Path:
    """A shard as webdataset.TarWriter(path, mtime=MTIME) writes `samples` (webdataset 1.0.2,
    checked against it: the same bytes): per sample, its fields in sorted order, each
    `<__key__>.<field>`, mode 0o444, owner and group `bigdata`, in tarfile's default (pax)
    format; an int is written as its digits, a dict as its JSON, a str in UTF-8."""
    with tarfile.open(path, "w") as tar:
        for sample in samples:
            for field in sorted(sample):
                if field == "__key__":
                    continue
                value = sample[field]
                if isinstance(value, int):
                    value = str(value)
                elif isinstance(value, dict):
                    value = json.dumps(value)
                data = value.encode("utf-8") if isinstance(value, str) else value
                _add(tar, f"{sample['__key__']}.{field}", data, 0o444, "bigdata")
    return path


def webdataset_samples(count: int, first: int = 0) -> list[dict]:
    """Samples of a JPEG, a class id (`cls`) and a JSON with a `photographer` field."""
    return [
        {
            "__key__": f"{first + index:06d}",
            "jpg": data,
            "cls": index % 3,
            "json": {"photographer": f"p{index % 2}", "label": "ignored: .cls comes first"},
        }
        for index, data in enumerate(_jpegs(count, first))
    ]
