"""Mistakes a run says, end to end through the command: labels that mix integer ids and names
(refused), image paths written relative to the current folder (a hint), and shards left empty
(a warning with the count). Each on the local runner and the DirectRunner."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import RUNNERS, command, error_rows, make_images, published, write_manifest

MIXED = "labels mix integer ids ("


def _mixed_rows(tmp_path) -> list[dict]:
    """The 20 images of `make_images`, every fourth labelled by an integer id instead."""
    rows = make_images(tmp_path)
    for index, row in enumerate(rows):
        if index % 4 == 0:
            row["label"] = str(index % 3)
    return rows


def _parquet(path, rows: list[dict]):
    pq.write_table(pa.table({key: [row[key] for row in rows] for key in rows[0]}), path)
    return path


def _multi_label(path, rows: list[dict]):
    lines = [{"image_uri": row["image_uri"], "label": [row["label"], "photo"]} for row in rows]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


MANIFESTS = {
    "csv": (lambda path, rows: write_manifest(path.with_suffix(".csv"), rows), ()),
    "jsonl": (lambda path, rows: write_manifest(path.with_suffix(".jsonl"), rows), ()),
    "parquet": (lambda path, rows: _parquet(path.with_suffix(".parquet"), rows), ()),
    "multi-label": (
        lambda path, rows: _multi_label(path.with_suffix(".jsonl"), rows),
        ["--multi_label"],
    ),
}


@pytest.mark.parametrize("runner", sorted(RUNNERS))
@pytest.mark.parametrize("kind", sorted(MANIFESTS))
def test_labels_that_mix_integer_ids_and_names_are_refused_in_one_line(tmp_path, kind, runner):
    write, flags = MANIFESTS[kind]
    manifest = write(tmp_path / "manifest", _mixed_rows(tmp_path))
    out = tmp_path / "out"
    done = command("convert", "--manifest", manifest, "--output", out, *flags, *RUNNERS[runner])
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"tfrecord-pipeline: error: {MIXED}'0', '1', ...) and names (")
    assert done.stderr.count("\n") == 1 and "[while running" not in done.stderr
    assert not list((out / "versions").glob("*/*.tfrecord"))


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_a_mistake_found_at_start_up_leaves_a_new_or_empty_output_as_it_was(tmp_path, runner):
    """A refused run left `versions/` behind (and the folders above it), so the folder looked
    like a dataset that never published. A root that published keeps its layout."""
    manifest = write_manifest(tmp_path / "m.csv", _mixed_rows(tmp_path))
    new, empty, used = tmp_path / "new" / "deeper", tmp_path / "empty", tmp_path / "used"
    empty.mkdir()
    good = write_manifest(tmp_path / "good.csv", make_images(tmp_path, per_class=1))
    assert command("convert", "--manifest", good, "--output", used).returncode == 0
    before = sorted(path.name for path in used.iterdir())
    for out in (new, empty, used):
        done = command("convert", "--manifest", manifest, "--output", out, *RUNNERS[runner])
        assert done.returncode == 2 and MIXED in done.stderr
    assert not (tmp_path / "new").exists() and list(empty.iterdir()) == []
    assert sorted(path.name for path in used.iterdir()) == before


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_a_label_map_makes_every_label_a_name(tmp_path, runner):
    rows = _mixed_rows(tmp_path)
    manifest = write_manifest(tmp_path / "manifest.csv", rows)
    names = sorted({row["label"] for row in rows})
    (tmp_path / "labels.txt").write_text("".join(f"{name}\n" for name in names))
    out = tmp_path / "out"
    argv = ["--manifest", manifest, "--output", out, "--label_map", tmp_path / "labels.txt"]
    done = command("convert", *argv, "--no_progress", *RUNNERS[runner])
    assert done.returncode == 0, done.stderr
    info = _versions_info(out)
    labels = next((out / "versions").glob("*/labels.txt")).read_text().splitlines()
    assert labels == names and info["records"] == len(rows)


def _versions_info(out) -> dict:
    return json.loads(next((out / "versions").glob("*/tfrecord_pipeline.json")).read_text())


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_image_paths_written_relative_to_the_current_folder_are_pointed_out(tmp_path, runner):
    project = tmp_path / "project"
    rows = make_images(project)  # images/<label>/<n>.jpg under the project folder
    (project / "lists").mkdir()
    manifest = write_manifest(project / "lists" / "manifest.csv", rows)
    argv = ["--manifest", "lists/manifest.csv", "--output", "out", "--no_progress"]
    done = command("convert", *argv, *RUNNERS[runner], cwd=project)
    assert done.returncode == 1  # every row missing_file: nothing to publish
    assert done.stderr.splitlines()[-1] == (
        f"tfrecord-pipeline: hint: most missing files exist relative to the current folder "
        f"({project}); relative paths are read from the manifest's folder "
        f"({manifest.parent}): use --image_root ."
    )
    fixed = command("convert", *argv, "--image_root", ".", *RUNNERS[runner], cwd=project)
    assert fixed.returncode == 0 and "hint" not in fixed.stderr, fixed.stderr
    elsewhere = command("convert", "--manifest", manifest, "--output", tmp_path / "o", cwd=tmp_path)
    assert elsewhere.returncode == 1 and "hint" not in elsewhere.stderr  # not found here either


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_shards_left_empty_are_counted_in_a_warning_and_the_run_goes_on(tmp_path, dataset, runner):
    out = tmp_path / "out"
    argv = ["--manifest", dataset, "--output", out, "--no_progress", "--num_shards", "64"]
    done = command("convert", *argv, *RUNNERS[runner])
    assert done.returncode == 0, done.stderr
    shards = _versions_info(out)["splits"]["train"]["shards"]
    empty = sum(1 for shard in shards if not shard["records"])
    assert len(shards) == 64 and empty >= 44
    assert done.stderr == (
        f"tfrecord-pipeline: warning: split 'train' has 20 records in 64 shards, {empty} of "
        "them empty: some readers fail on an empty shard (records go to shards by key hash: "
        "with --num_shards train=4 or fewer, one is unlikely)\n"
    )


def test_a_preset_that_leaves_most_shards_empty_is_warned_about(tmp_path, dataset):
    split = "--split train=0.75,validation=0.25"
    argv = ["--manifest", dataset, "--output", tmp_path / "out", *split.split()]
    done = command("convert", *argv, "--preset", "tpu-imagenet", "--no_progress")
    assert done.returncode == 0, done.stderr
    train, validation = done.stderr.splitlines()
    assert train.startswith("tfrecord-pipeline: warning: split 'train' has ")
    assert " records in 1,024 shards, " in train and " records in 128 shards, " in validation
    quiet = command("convert", *argv, "--preset", "tpu-imagenet", "--num_shards", "1")
    assert quiet.returncode == 0 and "warning" not in quiet.stderr


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_a_split_no_row_fell_in_is_warned_about(tmp_path, runner):
    """One row and two halves: one split gets no row, and the version, published without it,
    said nothing until a reader asked for the split."""
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1)[:1])
    out = tmp_path / "out"
    argv = ["--manifest", manifest, "--output", out, "--no_progress", *RUNNERS[runner]]
    done = command("convert", *argv, "--split", "train=0.5,validation=0.5")
    assert done.returncode == 0, done.stderr
    (kept,) = _versions_info(out)["splits"]
    (empty,) = {"train", "validation"} - {kept}
    assert done.stderr == (
        f"tfrecord-pipeline: warning: --split names '{empty}' but no row of 1 fell in it, so "
        f"the version has no '{empty}' split: give it a larger fraction, or give the "
        "rows a split column\n"
    )
    quiet = command("convert", *argv, "--split", f"{kept}=1")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_a_shard_count_for_a_split_no_row_has_is_warned_about(tmp_path, runner):
    """Every row is `train`: `--num_shards validation=2` was ignored without a word."""
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    out = tmp_path / "out"
    argv = ["--manifest", manifest, "--output", out, "--no_progress", *RUNNERS[runner]]
    done = command("convert", *argv, "--num_shards", "train=1,validation=2")
    assert done.returncode == 0, done.stderr
    assert list(_versions_info(out)["splits"]) == ["train"]
    assert done.stderr == (
        "tfrecord-pipeline: warning: --num_shards names 'validation' but no row of 4 has that "
        "split, so its count is not used: check the name, or give the rows a split column\n"
    )
    quiet = command("convert", *argv, "--num_shards", "train=1")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_a_label_offset_integer_labels_do_not_take_is_said_and_not_advised(tmp_path):
    """Integer labels are ids as written: --label_offset 1 changed nothing and said nothing,
    and the preset's warning advised that same flag for them."""
    rows = [{**row, "label": str(n % 3)} for n, row in enumerate(make_images(tmp_path, 2))]
    manifest = write_manifest(tmp_path / "m.csv", rows)
    argv = ["convert", "--manifest", manifest, "--no_progress", "--num_shards", "1"]
    done = command(*argv, "--output", tmp_path / "a", "--label_offset", "1")
    assert done.returncode == 0
    assert done.stderr == (
        "tfrecord-pipeline: warning: --label_offset 1 is not applied: the labels are integer "
        "ids, used as written (the offset numbers name labels); write the ids shifted\n"
    )
    done = command(*argv, "--output", tmp_path / "b", "--preset", "tpu-imagenet")
    assert done.returncode == 0
    assert done.stderr.endswith("read them as -1 (write the integer labels from 1)\n")
    assert "--label_offset" not in done.stderr


def test_image_paths_written_with_backslashes_are_pointed_out(tmp_path):
    """A manifest made on Windows (images\\cat\\0.jpg, CRLF): every row missing_file, and no
    word of why."""
    rows = make_images(tmp_path)
    rows = [{**row, "image_uri": row["image_uri"].replace("/", "\\")} for row in rows]
    manifest = write_manifest(tmp_path / "m.csv", rows)
    manifest.write_bytes(manifest.read_bytes().replace(b"\n", b"\r\n"))
    done = command("convert", "--manifest", manifest, "--output", tmp_path / "o", "--no_progress")
    assert done.returncode == 1
    hint = done.stderr.splitlines()[-1]
    assert hint.startswith("tfrecord-pipeline: hint: most missing files exist with / for \\ in ")
    assert hint.endswith("): write the manifest's image paths with / between folders")


@pytest.mark.parametrize(
    "header, says",
    [
        (
            "image_uri;label",
            "header is ['image_uri;label']: columns are separated by commas, not ';'",
        ),
        (
            "image_uri\tlabel",
            "header is ['image_uri\\tlabel']: columns are separated by commas, not '\\t'",
        ),
        (
            "Image_URI,Label",
            "header is ['Image_URI', 'Label']: column names are exact, 'Image_URI' is not "
            "'image_uri', 'Label' is not 'label'",
        ),
        (
            "image_uri, label",
            "header is ['image_uri', ' label']: column names are exact, ' label' is not 'label'",
        ),
    ],
)
def test_a_header_s_likely_mistake_is_named(tmp_path, header, says):
    """A spreadsheet's export with ';' between columns, or names written in another case or
    with a space: the message showed the header and left the user to spot it."""
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"{header}\nimages/a.jpg{header[9]}cat\n")
    done = command("convert", "--manifest", manifest, "--output", tmp_path / "o")
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.endswith(f"{says}\n") and done.stderr.count("\n") == 1, done.stderr


def _labelled_one_a_row(tmp_path, count: int) -> Path:
    """A manifest of `count` rows over the 20 images of `make_images`, each with a label (and a
    key) of its own, as a caption or id column taken for the label gives."""
    images = make_images(tmp_path)
    rows = [
        {"image_uri": images[index % 20]["image_uri"], "label": f"caption {index}", "key": index}
        for index in range(count)
    ]
    return write_manifest(tmp_path / "manifest.csv", rows)


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_labels_past_max_labels_are_refused_in_one_line_and_the_flag_allows_them(tmp_path, runner):
    manifest = _labelled_one_a_row(tmp_path, 40)
    out = tmp_path / "out"
    argv = ["--manifest", manifest, "--output", out, "--no_progress", *RUNNERS[runner]]
    done = command("convert", *argv, "--max_labels", "30")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "tfrecord-pipeline: error: column 'label' has over 30 distinct labels: a label names a "
        "class (ImageNet-21k has 21,841); is it an id or caption column? --max_labels N allows "
        "more (docs/inputs.md#how-many-labels)\n"
    )
    assert not list(out.glob("versions/*/*.tfrecord"))
    allowed = command("convert", *argv, "--max_labels", "40")
    assert allowed.returncode == 0, allowed.stderr
    info = _versions_info(out)
    assert info["records"] == 40 and info["labels"]["count"] == 40


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_labels_one_a_row_are_refused_and_a_label_longer_than_a_name_is_an_error_row(
    tmp_path, runner
):
    manifest = _labelled_one_a_row(tmp_path, 1_001)
    out = tmp_path / "out"
    argv = ["--manifest", manifest, "--output", out, "--no_progress", *RUNNERS[runner]]
    done = command("convert", *argv)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(
        "tfrecord-pipeline: error: column 'label' has 1,001 distinct labels in 1,001 given, "
        "nearly one a row: a label names a class; is it an id or caption column? --max_labels N"
    )
    assert not (out / "versions").exists() or not list(out.glob("versions/*/*.tfrecord"))
    rows = make_images(tmp_path)
    rows[0]["label"] = "x" * 300  # one hostile cell: its row, not the night
    long = write_manifest(tmp_path / "long.csv", rows)
    done = command("convert", *argv[2:], "--manifest", long, "--max_error_rate", "0.1")
    assert done.returncode == 0, done.stderr
    (error,) = error_rows(published(out))
    assert error["reason"] == "bad_label" and error["message"].startswith("a label of 300 bytes")
