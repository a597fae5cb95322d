"""The `convert` command's options, each declared once, by group: the input and output groups
here, the others in pipeline/config/flags_images.py. Everything else is made from FLAGS: the
parser (pipeline/config/arguments.py), `ConvertOptions` and its defaults
(pipeline/config/options.py), the checks (pipeline/config/conversion.py), the Flex Template's
deploy/metadata.json (pipeline/config/template.py), `--help`, `--help-all` and the docs' options
page (pipeline/cli/help.py). Adding an option is one `Option(...)` in its group."""

from tfrecord_pipeline.config.flags_images import WORK
from tfrecord_pipeline.config.option import REQUIRED, RUN, Option, grouped
from tfrecord_pipeline.config.presets import PRESETS
from tfrecord_pipeline.config.values import (
    FLOAT,
    INT,
    PATHS,
    POSITIVE,
    REPEATED,
    SWITCH,
    TEXT,
    Check,
    between,
    choice,
)
from tfrecord_pipeline.transforms.manifest.labels import CONTROL, MAX_LABELS
from tfrecord_pipeline.transforms.manifest.rows import FEATURE_TYPES
from tfrecord_pipeline.transforms.write.formats import FILE_FORMATS

_PRINTABLE = Check(
    lambda text: bool(text) and not CONTROL.search(text), "must be one or more printable characters"
)

INPUT_OUTPUT = grouped(
    "input",
    Option("--manifest", PATHS, REQUIRED,
           "CSV, JSONL, Parquet or COCO files, globs, class-folder roots, tar or zip archives or "
           "folders of them (docs/inputs.md#archives), local or `gs://`; the flag may be given "
           "again for more",
           value="M", brief="manifests, globs, class-folder roots, archives",
           scope=RUN, label="Manifests"),
    Option("--image_root", TEXT, None,
           "folder that relative image paths (a COCO file's `file_name`s too) are under",
           value="DIR", said="the manifest's folder",
           scope=RUN),  # a path, as the manifests' are: moving the images changes no record
    Option("--split", TEXT, None,
           "split for rows without a `split` value, from a hash of the key: each share a fraction "
           "of 1, the shares summing to 1 (not percentages); with neither, rows are `train`",
           value="train=0.9,validation=0.1",
           brief="split rows without one by key hash"),
    Option("--label_map", TEXT, None,
           "pin label ids to a `labels.txt` (one name per line, id = line number + offset); a "
           "label missing from it is an error row",
           value="FILE"),
    Option("--ground_truth", TEXT, None,
           "the labels of a flat archive's images (at its top, in no class folder), one a line in "
           "the order of the images' names, as `synset_labels.txt` labels ImageNet's validation "
           "tar (docs/inputs.md#imagenet)",
           value="FILE"),
    Option("--label_field", TEXT, "label",
           "the field of a WebDataset sample's `.json` member that holds its label, when it has "
           "no `.cls` or `.txt` (docs/inputs.md#webdataset-shards)", _PRINTABLE, value="NAME"),
    Option("--label_offset", INT, None,
           "first id for name labels (1 for the TPU ImageNet readers). Labels that are all "
           "integers are used as ids unchanged", Check(lambda k: k >= 0, "must be 0 or more"),
           value="K", said="0, or `--preset`'s"),
    Option("--max_labels", INT, None,
           "the most distinct labels a run takes; more, or over 1,000 nearly one a row (an id or "
           "caption column), is refused before any image is read; giving it allows labels one a "
           "row. A label is at most 256 bytes (docs/inputs.md)", POSITIVE,
           value="N", said=f"{MAX_LABELS:,}"),
    Option("--multi_label", SWITCH, False,
           "several labels an image: a CSV label cell is split on `--label_separator`, a JSONL "
           "or Parquet label may be a list (`[]`: none); records hold lists of ids and texts, "
           "and `load()` gives a multi-hot vector (docs/detection.md)",
           label="Multi-label"),
    Option("--label_separator", TEXT, "|",
           "what separates the labels of a CSV cell (or a JSONL string) with `--multi_label`",
           _PRINTABLE, value="SEP"),
    Option("--feature", REPEATED, [],
           "add a manifest column as a scalar feature (repeatable)",
           value=f"name:{'|'.join(FEATURE_TYPES)}"),
    Option("--drop_negatives", SWITCH, False,
           "detection: an image with no objects is left out and counted (`negatives_dropped`), "
           "not written as a negative example"),
    Option("--masks", SWITCH, False,
           "detection: write each object's mask (a COCO `segmentation`: polygons or RLE) as a PNG "
           "in `image/object/mask`, for Mask R-CNN; an object without one is a `bad_annotation` "
           "(docs/detection.md)",
           label="Instance masks"),
    "output",
    Option("--output", TEXT, REQUIRED, "output folder (local or `gs://`)",
           Check(lambda text: bool(text.strip()), "is empty; name the folder to write into"),
           value="DIR", brief="the dataset root: versions/ and LATEST",
           scope=RUN, label="Output folder"),
    Option("--preset", choice(PRESETS), None,
           "the conventions of the readers named: `tpu-imagenet` (the TPU reference ImageNet "
           "readers, which subtract 1 from the label) sets `--label_offset 1` and `--num_shards "
           "train=1024,validation=128`; a flag given too wins (docs/readers/tpu.md); its "
           "readers take one label an image, so `--multi_label` is refused",
           value="|".join(PRESETS)),
    Option("--file_format", choice(FILE_FORMATS), "tfrecord",
           "`array_record`: ArrayRecord shards (`group_size:1`) of the same records, read by index "
           "by Grain and TFDS (docs/output.md#arrayrecord-shards)",
           value="|".join(FILE_FORMATS), brief="array_record: Grain's"),
    Option("--compression", choice(("none", "gzip")), "none",
           'gzip shards are `.tfrecord.gz` (read with `compression_type="GZIP"`); TensorFlow '
           "Datasets cannot read them, so such a dataset has no TFDS files",
           value="none|gzip"),
    Option("--write_index", SWITCH, False,
           "write `index/<shard>.idx` for each shard: `offset size` per record, the index NVIDIA "
           "DALI's TFRecord reader takes (uncompressed shards only). In a folder of their own, so "
           "`<split>-*` matches the shards alone",
           brief="an index file per shard, for NVIDIA DALI"),
    Option("--max_error_rate", FLOAT, 0.01,
           "above this share of rejected rows the version is not published and the exit status "
           "is 1", between(0, 1),
           value="R", brief="publish with up to this share rejected"),
    Option("--run_key", TEXT, None,
           "an id its retries repeat (Airflow's `run_id`): if a version a run with this key "
           "published is still kept, nothing is converted or published, exit status 0 "
           "(docs/runners.md#run-keys)",
           value="KEY"),
)  # fmt: skip

FLAGS = (*INPUT_OUTPUT, *WORK)


def in_group(group: str) -> tuple[Option, ...]:
    return tuple(option for option in FLAGS if option.group == group)
