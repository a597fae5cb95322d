"""The readers users run, as they are, on our shards: the TensorFlow Model Garden's decoders
(tf-models-official 2.20.0), the `tfrecord` package (PyTorch) and NVIDIA DALI's CPU reader
through our index files (byte for byte what each one's `tfrecord2idx` writes), and the TPU
reference ImageNet readers' parsing with `--preset tpu-imagenet`, with its label warning.

`tfrecord` registers its own copy of TensorFlow's `example.proto` in protobuf's default pool,
which refuses a second definition of `tensorflow.Example`: it cannot be imported in a process
that imports TensorFlow (as this one does). Like DALI, it runs in a process of its own here,
as it does for its users, and what it read comes back as JSON.
"""

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import BEAM, arguments, command, version_files
from made_archives import SYNSETS, imagenet_tars
from model_garden import dataloader

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.read.load import load
from tfrecord_pipeline.runners.convert import run

pytestmark = pytest.mark.slow
SAMPLE = Path(__file__).resolve().parents[1] / "sample"
_DTYPES = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}


@pytest.fixture(scope="module")
def version(tmp_path_factory) -> tuple[Path, object]:
    """The sample as a classification dataset with DALI index files: its folder and info."""
    output = tmp_path_factory.mktemp("consumers") / "flowers"
    argv = arguments(
        "--manifest {manifest} --output {output} --no_progress --num_shards 2"
        " --split train=0.8,validation=0.2 --write_index",
        manifest=SAMPLE / "manifest.csv",
        output=output,
    )
    converted = run(argv)
    return Path(converted.folder), converted.info


def _shards(folder: Path, info) -> list[Path]:
    return [folder / shard.file for split in info.splits.values() for shard in split.shards]


def _parsed(folder: Path, info) -> dict[str, dict]:
    """Every record as TensorFlow parses it with the recorded spec, by `image/source_id`."""
    spec = {key: tf.io.FixedLenFeature([], _DTYPES[kind]) for key, kind in info.features.items()}
    records = tf.data.TFRecordDataset([str(path) for path in _shards(folder, info)])
    parsed = [tf.io.parse_single_example(record, spec) for record in records]
    return {
        p["image/source_id"].numpy().decode(): {k: v.numpy() for k, v in p.items()} for p in parsed
    }


def _run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_model_garden_classification_decoder_and_parser_read_every_record(version):
    """As Model Garden's image classification task builds its input (`tasks/
    image_classification.py`: DataConfig's default keys, not multi-label)."""
    folder, info = version
    classification_input = dataloader("classification_input")
    decoder = classification_input.Decoder(
        image_field_key="image/encoded", label_field_key="image/class/label", is_multilabel=False
    )
    parser = classification_input.Parser(output_size=[64, 64], num_classes=5)
    parse = parser.parse_fn(is_training=False)
    expected = _parsed(folder, info)
    decoded = [
        decoder.decode(record)
        for record in tf.data.TFRecordDataset([str(path) for path in _shards(folder, info)])
    ]
    assert len(decoded) == info.records == len(expected) == 40
    by_bytes = {e["image/encoded"]: e for e in expected.values()}
    for fields in decoded:
        record = by_bytes[fields["image/encoded"].numpy()]
        assert fields["image/class/label"].numpy() == record["image/class/label"]
        image, label = parse(fields)
        assert image.shape == (64, 64, 3) and label.numpy() == record["image/class/label"]
    assert sorted({int(f["image/class/label"]) for f in decoded}) == [0, 1, 2, 3, 4]


def test_model_garden_multilabel_decoder_and_parser_give_load_s_multi_hot_vectors(tmp_path):
    """Model Garden's task with `is_multilabel=True` on a `--multi_label` conversion: its
    labels are the multi-hot vectors our own `load()` gives, record for record."""
    argv = arguments(
        "--manifest {manifest} --output {output} --no_progress --multi_label --num_shards 1",
        manifest=SAMPLE / "tags.jsonl",
        output=tmp_path / "tags",
    )
    converted = run(argv)
    classes = converted.info.labels["count"]
    classification_input = dataloader("classification_input")
    decoder = classification_input.Decoder(is_multilabel=True)
    parse = classification_input.Parser(
        output_size=[32, 32], num_classes=classes, is_multilabel=True
    ).parse_fn(is_training=False)
    shard = Path(converted.folder) / converted.info.splits["train"].shards[0].file
    garden = [
        parse(decoder.decode(record))[1].numpy() for record in tf.data.TFRecordDataset(str(shard))
    ]
    ours = load(str(tmp_path / "tags"), "train", batch_size=None, image_size=None, shuffle_buffer=0)
    ours = [label.numpy() for _, label in ours]
    assert len(garden) == len(ours) == 40 and classes == 7
    assert all(np.array_equal(a, b) for a, b in zip(garden, ours, strict=True))


def test_model_garden_detection_decoder_reads_classification_records_as_images_without_boxes(
    version,
):
    folder, info = version
    decoder = dataloader("tf_example_decoder").TfExampleDecoder()
    expected = _parsed(folder, info)
    for record in tf.data.TFRecordDataset([str(path) for path in _shards(folder, info)]):
        decoded = decoder.decode(record)
        source = expected[decoded["source_id"].numpy().decode()]
        assert decoded["image"].shape == (source["image/height"], source["image/width"], 3)
        assert decoded["groundtruth_boxes"].shape == (0, 4)
        assert decoded["groundtruth_classes"].shape == (0,)


# The `tfrecord` package's own index (tfrecord2idx), and every record read through our index by
# its PyTorch dataset in a DataLoader with two workers: each worker reads the byte range of its
# half of a shard, from the offsets in the index.
_TFRECORD = """
import base64, json, sys
import torch
from tfrecord.tools.tfrecord2idx import create_index
from tfrecord.torch.dataset import TFRecordDataset

shards, description, out = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
for number, (shard, index) in enumerate(shards):
    create_index(shard, f"{out}/{number}.idx")
    dataset = TFRecordDataset(shard, index, description)
    for record in torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2):
        print(json.dumps({key: base64.b64encode(value).decode() if isinstance(value, bytes)
                          else value.tolist() for key, value in record.items()}))
"""


def test_tfrecord_package_indexes_alike_and_reads_every_record_through_our_index(version, tmp_path):
    folder, info = version
    shards = [
        (str(path), str(folder / "index" / f"{path.name}.idx")) for path in _shards(folder, info)
    ]
    kinds = {"int64": "int", "float32": "float", "string": "byte"}
    description = {key: kinds[kind] for key, kind in info.features.items()}
    lines = _run(_TFRECORD, json.dumps(shards), json.dumps(description), str(tmp_path))
    for number, (_, index) in enumerate(shards):
        assert (tmp_path / f"{number}.idx").read_bytes() == Path(index).read_bytes()
    read = [json.loads(line) for line in lines.splitlines()]
    expected = _parsed(folder, info)
    assert len(read) == len(expected) == info.records
    for record in read:
        source = expected[base64.b64decode(record["image/source_id"]).decode()]
        for key, value in source.items():
            got = record[key]
            got = base64.b64decode(got) if isinstance(value, bytes) else np.asarray(got).item()
            assert got == value, key


# DALI's CPU pipeline (no GPU: device_id=None): its TFRecord reader over every shard with our
# index files, in file order, and its CPU image decoder.
_DALI = """
import hashlib, json, sys
import nvidia.dali.tfrecord as tfrec
from nvidia.dali import fn, pipeline_def

shards, indexes = json.loads(sys.argv[1]), json.loads(sys.argv[2])

@pipeline_def(batch_size=1, num_threads=1, device_id=None)
def records():
    features = fn.readers.tfrecord(path=shards, index_path=indexes, random_shuffle=False,
        name="reader", features={
            "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
            "image/class/label": tfrec.FixedLenFeature([], tfrec.int64, -1)})
    encoded = features["image/encoded"]
    return encoded, fn.decoders.image(encoded, device="cpu"), features["image/class/label"]

pipe = records()
pipe.build()
for _ in range(pipe.epoch_size("reader")):
    encoded, image, label = (output.as_array()[0] for output in pipe.run())
    print(json.dumps([hashlib.sha256(encoded.tobytes()).hexdigest(), list(image.shape),
                      float(image.mean()), int(label.item())]))
"""


def test_dali_indexes_alike_and_its_cpu_reader_reads_every_record_through_our_index(
    version, tmp_path
):
    folder, info = version
    shards = _shards(folder, info)
    indexes = [str(folder / "index" / f"{path.name}.idx") for path in shards]
    tfrecord2idx = str(Path(sys.executable).parent / "tfrecord2idx")  # DALI's script
    made = [tmp_path / f"{number}.idx" for number in range(len(shards))]
    processes = [
        subprocess.Popen([tfrecord2idx, str(shard), str(path)], stdout=subprocess.DEVNULL)
        for shard, path in zip(shards, made, strict=True)
    ]
    assert [process.wait() for process in processes] == [0] * len(shards)
    assert [path.read_bytes() for path in made] == [Path(i).read_bytes() for i in indexes]
    lines = _run(_DALI, json.dumps([str(path) for path in shards]), json.dumps(indexes))
    read = [json.loads(line) for line in lines.splitlines()]
    expected = {
        hashlib.sha256(r["image/encoded"]).hexdigest(): r for r in _parsed(folder, info).values()
    }
    assert len(read) == len(expected) == info.records
    assert {digest for digest, *_ in read} == set(expected)
    for digest, shape, mean, label in read:
        record = expected[digest]
        pixels = tf.io.decode_jpeg(record["image/encoded"], channels=3).numpy()
        assert shape == list(pixels.shape) and label == record["image/class/label"]
        assert abs(mean - pixels.mean()) < 1.0  # two JPEG decoders, a level or so apart


# The TPU reference ImageNet readers, which cannot be installed (no package; TF1 APIs): their
# parsing, as in tensorflow/tpu models/official/resnet/imagenet_input.py (commit 03c4c36c) and
# models/official/efficientnet/imagenet_input.py (commit 139e1f48), in TF2 names. Both read
# `<data_dir>/train-*` and `validation-*` and subtract 1 from the label (efficientnet unless
# include_background_label); its model then one-hot encodes it over num_label_classes.
_RESNET_KEYS = {
    "image/encoded": tf.io.FixedLenFeature((), tf.string, ""),
    "image/format": tf.io.FixedLenFeature((), tf.string, "jpeg"),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64, -1),
    "image/class/text": tf.io.FixedLenFeature([], tf.string, ""),
    **{
        f"image/object/bbox/{edge}": tf.io.VarLenFeature(tf.float32)
        for edge in ("xmin", "ymin", "xmax", "ymax")
    },
    "image/object/class/label": tf.io.VarLenFeature(tf.int64),
}


def _reference_labels(folder: Path, pattern: str) -> list[int]:
    """Each record's label as both reference parsers compute it, checked to agree."""
    files = tf.data.Dataset.list_files(str(folder / pattern), shuffle=False)
    labels = []
    for value in tf.data.TFRecordDataset(files):
        parsed = tf.io.parse_single_example(value, _RESNET_KEYS)
        tf.image.decode_image(tf.reshape(parsed["image/encoded"], shape=[]), 3)
        resnet = tf.cast(tf.reshape(parsed["image/class/label"], shape=[]), tf.int32) - 1
        efficientnet = tf.cast(tf.reshape(parsed["image/class/label"], shape=[]), tf.int32)
        efficientnet -= 1  # include_background_label=False
        assert resnet == efficientnet
        labels.append(int(resnet))
    return labels


def _convert_cli(output: Path, *flags: str) -> tuple[int, str]:
    """The command line as a user runs it: exit status and what it wrote on stderr."""
    argv = arguments(
        "convert --manifest {manifest} --output {output} --no_progress"
        " --split train=0.8,validation=0.2",
        manifest=SAMPLE / "manifest.csv",
        output=output,
    )
    argv += flags
    done = subprocess.run(
        [sys.executable, "-m", "tfrecord_pipeline.cli.main", *argv], capture_output=True, text=True
    )
    return done.returncode, done.stderr


def _published(root: Path) -> Path:
    return root / "versions" / json.loads((root / "LATEST").read_text())["version"]


def test_tpu_imagenet_preset_gives_the_reference_readers_labels_from_0(tmp_path):
    status, stderr = _convert_cli(
        tmp_path / "tpu", "--preset", "tpu-imagenet", "--num_shards", "2", "--write_index"
    )
    assert status == 0 and stderr == ""
    folder = _published(tmp_path / "tpu")
    labels = [*_reference_labels(folder, "train-*"), *_reference_labels(folder, "validation-*")]
    assert len(labels) == 40 and set(labels) == set(range(5))  # [0, num_classes - 1]
    one_hot = tf.one_hot(labels, 5).numpy()  # efficientnet's target: one 1 in every row
    assert (one_hot.sum(axis=1) == 1).all()
    assert len(list(folder.glob("train-*"))) == len(list(folder.glob("validation-*"))) == 2
    _read_by_the_reference_s_own_names(tmp_path / "tpu", folder, records=len(labels))


def _read_by_the_reference_s_own_names(root: Path, folder: Path, records: int) -> None:
    """efficientnet's `holdout_shards` opens `train-%05d-of-01024` as it names it, without an
    extension (it failed on `.tfrecord` names with NotFoundError); verify, load() and TFDS
    read the same names from the metadata."""
    import tensorflow_datasets as tfds

    names = [
        f"{split}-{index:05d}-of-00002" for split in ("train", "validation") for index in (0, 1)
    ]
    assert sorted(path.name for path in folder.glob("*-of-*")) == names
    opened = tf.data.TFRecordDataset([str(folder / name) for name in names])
    assert sum(1 for _ in opened) == records
    assert main(["verify", str(root), "--decode", "none"]) == 0
    loaded = load(str(root), "train", batch_size=None, shuffle_buffer=0)
    builder = tfds.builder_from_directory(str(folder))
    assert sum(1 for _ in loaded) == sum(1 for _ in builder.as_dataset(split="train")) > 0


@pytest.mark.slow
def test_imagenet_s_official_tars_convert_in_one_command_alike_on_both_runners(tmp_path):
    """The train tar of per-synset tars and the flat validation tar with synset_labels.txt,
    as docs/inputs.md#imagenet converts them: the same shards from the local runner and
    DirectRunner, read by the reference parsing with ids from 0 by sorted synset."""
    tars = imagenet_tars(tmp_path / "imagenet")
    given = [*tars["ground_truth"].read_text().split()]
    flags = arguments(
        "convert --preset tpu-imagenet --manifest {train} --manifest {validation}"
        " --ground_truth {ground_truth} --num_shards train=2,validation=1 --no_progress",
        **tars,
    )
    versions = []
    for name, runner in (("local", []), ("beam", BEAM)):
        done = command(*flags, "--output", tmp_path / name, *runner)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        versions.append(_published(tmp_path / name))
    shards = [
        {k: v for k, v in version_files(v).items() if re.fullmatch(r"\w+-\d{5}-of-\d{5}", k)}
        for v in versions
    ]
    assert shards[0] == shards[1]
    assert sorted(shards[0]) == [  # the TPU reference readers' names, without an extension
        "train-00000-of-00002",
        "train-00001-of-00002",
        "validation-00000-of-00001",
    ]
    folder = versions[0]
    assert (folder / "labels.txt").read_text().split() == list(SYNSETS)
    train = _reference_labels(folder, "train-*")
    assert sorted(train) == [0, 0, 0, 1, 1, 1, 2, 2, 2]  # synset i is 1 + i in the records
    validation = _parsed_labels(folder, "validation-*")
    names = [f"ILSVRC2012_img_val.tar#ILSVRC2012_val_{n:08d}.JPEG" for n in range(1, 6)]
    ids = [SYNSETS.index(synset) + 1 for synset in given]  # line n labels the nth name
    assert validation == dict(zip(names, ids, strict=True))
    assert sorted(_reference_labels(folder, "validation-*")) == sorted(
        SYNSETS.index(synset) for synset in given
    )


def _parsed_labels(folder: Path, pattern: str) -> dict[str, int]:
    """Each record's `image/class/label` as TensorFlow reads it, by `image/source_id`."""
    spec = {
        "image/source_id": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }
    files = sorted(str(path) for path in folder.glob(pattern))
    parsed = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(files)]
    return {p["image/source_id"].numpy().decode(): int(p["image/class/label"]) for p in parsed}


def test_offset_0_under_the_preset_warns_and_the_readers_would_read_minus_1(tmp_path):
    status, stderr = _convert_cli(
        tmp_path / "tpu", "--preset", "tpu-imagenet", "--label_offset", "0", "--num_shards", "2"
    )
    assert status == 0
    assert stderr.count("\n") == 1 and stderr.startswith("tfrecord-pipeline: warning: ")
    assert "--label_offset 1" in stderr
    folder = _published(tmp_path / "tpu")
    labels = _reference_labels(folder, "train-*")
    assert min(labels) == -1  # the trap the warning is for
    assert (tf.one_hot(labels, 5).numpy().sum(axis=1) == 0).any()


def test_preset_sets_the_reference_shard_counts_unless_a_flag_is_given(tmp_path, capsys):
    argv = arguments(
        "convert --manifest {manifest} --no_progress --split train=0.8,validation=0.2"
        " --preset tpu-imagenet",
        manifest=SAMPLE / "manifest.csv",
    )
    assert main([*argv, "--output", str(tmp_path / "a")]) == 0
    info = json.loads((_published(tmp_path / "a") / "tfrecord_pipeline.json").read_text())
    counts = {name: len(split["shards"]) for name, split in info["splits"].items()}
    assert counts == {"train": 1024, "validation": 128}
    assert info["labels"]["offset"] == 1 and info["options"]["preset"] == "tpu-imagenet"
    assert main([*argv, "--output", str(tmp_path / "b"), "--num_shards", "3"]) == 0
    info = json.loads((_published(tmp_path / "b") / "tfrecord_pipeline.json").read_text())
    assert {len(split["shards"]) for split in info["splits"].values()} == {3}
    assert "label 0" not in capsys.readouterr().err  # ids from 1; the empty shards are warned of


def test_a_dataset_shaped_like_imagenet_with_ids_from_0_warns_once(tmp_path):
    """1000 class names in train and validation, ids from 0: one line on stderr, still
    published; with --label_offset 1, none."""
    image = next(SAMPLE.glob("images/*/*.jpg"))
    rows = [
        f"{image},n{number:08d},{number},{'validation' if number % 10 else 'train'}"
        for number in range(1000)
    ]
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("image_uri,label,key,split\n" + "\n".join(rows) + "\n")
    for output, flags, warned in (("zero", (), True), ("one", ("--label_offset", "1"), False)):
        argv = arguments(
            "convert --manifest {manifest} --output {output} --no_progress --num_shards 1",
            manifest=manifest,
            output=tmp_path / output,
        )
        argv += flags
        done = subprocess.run(
            [sys.executable, "-m", "tfrecord_pipeline.cli.main", *argv],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.count("1000 class names") == warned and done.stderr.count("\n") == warned
