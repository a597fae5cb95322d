"""The tf.data loader on converted output: shapes, dtypes, labels, counts, host sharding."""

import shutil
from pathlib import Path

import pytest
import tensorflow as tf
from conftest import arguments

from tfrecord_pipeline import load
from tfrecord_pipeline.dataset.versions import MARKER, VERSIONS

pytestmark = pytest.mark.slow
SAMPLE = Path(__file__).resolve().parents[1] / "sample" / "manifest.csv"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    from tfrecord_pipeline.runners.convert import run

    output = tmp_path_factory.mktemp("load") / "out"
    flags = ["--num_shards", "4", "--split", "train=0.75,validation=0.25"]
    argv = arguments("--manifest {m} --output {out} --no_progress", m=SAMPLE, out=output)
    converted = run([*argv, *flags, "--direct_num_workers=1"])
    return str(output), converted.info


def test_batches_for_tpu(sample):
    output, info = sample
    dataset = load(output, "train", batch_size=4, image_size=(64, 48), seed=1)
    assert dataset.element_spec[0].shape == (4, 64, 48, 3)  # static: drop_remainder
    assert dataset.element_spec[0].dtype == tf.float32
    assert dataset.element_spec[1].dtype == tf.int64
    batches = list(dataset)
    assert len(batches) == info.splits["train"].examples // 4


def test_the_dataset_knows_its_length_so_keras_knows_an_epoch_s(sample):
    """Without it `len()` raised and Keras' fit warned after the first epoch that the input
    "ran out of data", telling the user to add `.repeat()`."""
    output, info = sample
    examples = info.splits["train"].examples
    assert len(load(output, "train", batch_size=4, image_size=(8, 8))) == examples // 4
    kept = load(output, "train", batch_size=4, image_size=(8, 8), drop_remainder=False)
    assert len(kept) == -(-examples // 4) == len(list(kept))
    hosts = [load(output, "train", None, (8, 8), num_hosts=2, host_index=i) for i in (0, 1)]
    assert [len(host) for host in hosts] == [len(list(host)) for host in hosts]
    assert sum(map(len, hosts)) == examples


def test_every_example_once_and_every_label_reachable(sample):
    output, info = sample
    for split in ("train", "validation"):
        examples = list(
            load(
                output,
                split,
                batch_size=None,
                image_size=None,
                shuffle_buffer=0,
                with_features=True,
            )
        )
        assert len(examples) == info.splits[split].examples
        keys = [e["image/source_id"].numpy() for e in examples]
        assert len(set(keys)) == len(keys)
        for example in examples[:5]:
            assert example["image"].shape == (example["image/height"], example["image/width"], 3)
    labels = {int(label) for _, label in load(output, "train", batch_size=None, image_size=(8, 8))}
    labels |= {int(label) for _, label in load(output, "validation", None, (8, 8))}
    assert labels == {0, 1, 2, 3, 4}


def test_hosts_read_disjoint_shares(sample):
    output, info = sample

    def keys(host):
        dataset = load(
            output,
            "train",
            batch_size=None,
            image_size=None,
            shuffle_buffer=0,
            num_hosts=2,
            host_index=host,
            with_features=True,
        )
        return {e["image/source_id"].numpy() for e in dataset}

    first, second = keys(0), keys(1)
    assert not first & second and len(first | second) == info.splits["train"].examples


def test_refuses_uncommitted_and_unknown_split(sample, tmp_path):
    output, _ = sample
    with pytest.raises(ValueError, match="split"):
        load(output, "test")
    uncommitted = tmp_path / "copy"
    shutil.copytree(output, uncommitted)
    (version,) = (uncommitted / VERSIONS).iterdir()
    (version / MARKER).unlink()
    with pytest.raises(ValueError, match="is not complete"):  # the root: LATEST names it
        load(str(uncommitted), "train")
    with pytest.raises(ValueError, match="_COMMITTED"):  # the version folder itself
        load(str(version), "train")


def test_a_pathlib_root_is_read_as_its_string(sample):
    """load(Path(root)) and verify(Path(root)) ended in AttributeError: no attribute 'rstrip'."""
    from tfrecord_pipeline import verify

    output, info = sample
    examples = info.splits["train"].examples
    assert len(load(Path(output), "train", batch_size=None, image_size=(8, 8))) == examples
    assert verify(Path(output), "none") == (examples + info.splits["validation"].examples, [])


@pytest.mark.parametrize(("offset", "classes"), [("0", 7), ("1", 8)])
def test_with_info_gives_the_number_of_classes_a_classifier_needs(tmp_path, offset, classes):
    """Seven labels: the README's model once hard-coded Dense(5), and Keras refused label 6
    ("outside the valid range of [0, 5)"); info.num_classes is the width that takes every id."""
    from tensorflow import keras

    from tfrecord_pipeline.runners.convert import run

    rows = SAMPLE.read_text().splitlines()[1:]
    lines = ["image_uri,label", *(f"{row.split(',')[0]},c{i % 7}" for i, row in enumerate(rows))]
    (tmp_path / "seven.csv").write_text("\n".join(lines) + "\n")
    argv = ["--manifest", str(tmp_path / "seven.csv"), "--output", str(tmp_path / "out")]
    argv += ["--image_root", str(SAMPLE.parent), "--label_offset", offset, "--no_progress"]
    run(argv)
    train, info = load(str(tmp_path / "out"), batch_size=8, image_size=(8, 8), with_info=True)
    assert info.num_classes == classes and info.examples == 40
    assert int(max(max(labels.numpy()) for _, labels in train)) == classes - 1
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten()])
    model.add(keras.layers.Dense(info.num_classes))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert len(model.fit(train, epochs=1, verbose=0).history["loss"]) == 1


def test_integer_ids_that_cannot_index_a_vector_have_no_number_of_classes():
    from tfrecord_pipeline.read.load import num_classes

    assert num_classes({"labels": {"kind": "integers", "offset": 0, "names": ["3", "9"]}}) == 10
    assert num_classes({"labels": {"kind": "integers", "offset": 0, "names": ["-1", "2"]}}) is None
    assert num_classes({"labels": {"kind": "names", "offset": 1, "count": 4}}) == 5


def test_only_the_train_split_drops_its_last_partial_batch_by_default(sample):
    """A validation split smaller than a batch was empty: fit(validation_data=...) reported no
    val_ metrics, and exited 0. Train batches keep their static shape for TPU."""
    output, info = sample
    examples = info.splits["validation"].examples
    assert examples < 16
    validation = load(output, "validation", batch_size=16, image_size=(8, 8))
    assert [len(labels) for _, labels in validation] == [examples]
    assert validation.element_spec[0].shape[0] is None
    train = load(output, "train", batch_size=16, image_size=(8, 8))
    assert train.element_spec[0].shape[0] == 16
    assert len(list(train)) == info.splits["train"].examples // 16
