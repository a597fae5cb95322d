"""The `convert` command's flags as one table, by group: argparse, `--help`, `--help-all` and the
docs' options page (pipeline/cli/help.py `markdown_table`) are all made from it. Adding a flag is
one entry in FLAGS, in its group, plus its field, with the default, in `ConvertOptions`."""

from collections.abc import Mapping
from typing import Any, NamedTuple

from tfrecord_pipeline.config.presets import PRESETS
from tfrecord_pipeline.config.values import FLOAT, INT, SWITCH
from tfrecord_pipeline.transforms.image.config import ENCODINGS, RESAMPLE_FILTERS, VALIDATE_MODES
from tfrecord_pipeline.transforms.manifest.rows import FEATURE_TYPES
from tfrecord_pipeline.transforms.write.formats import FILE_FORMATS


class Flag(NamedTuple):
    """One flag: its name, the value it takes (argparse's metavar), how argparse reads it
    (`add_argument`'s keywords), its meaning in Markdown, and its default in words where
    `ConvertOptions`' value would not say it (`by size`); otherwise that value is shown.
    `brief`, a line of plain text, puts it on `convert --help`'s first screen."""

    name: str
    value: str
    parse: Mapping[str, Any]
    meaning: str
    default: str = ""
    brief: str = ""
    group: str = ""

    @property
    def dest(self) -> str:
        """The `ConvertOptions` field the flag sets."""
        return self.parse.get("dest", self.name.removeprefix("--"))


# The headings of `--help-all` and of the options page, in order, and what their flags are about.
GROUPS = {
    "input": "what is read: the manifests, their images' folder, splits and labels",
    "output": "where the dataset is written, in what form, and when it is published",
    "images": "how each image is checked, decoded, resized and stored",
    "sharding": "how many shard files each split is written as",
    "runners": "how the conversion runs: on this machine or on Dataflow",
    "refresh": "converting again into a root that already has a published version",
}


def _grouped(*items: str | Flag) -> tuple[Flag, ...]:
    """Flags from a list in which each group's name comes before its flags."""
    flags, group = [], ""
    for item in items:
        if isinstance(item, str):
            group = item
        else:
            flags.append(item._replace(group=group))
    return tuple(flags)


def _choices(names) -> dict:
    return {"choices": tuple(names)}


FLAGS = _grouped(
    "input",
    Flag("--manifest", "M", {"nargs": "+", "required": True},
         "CSV, JSONL or Parquet files, globs, or class-folder roots (local or `gs://`)",
         brief="CSV, JSONL, Parquet or COCO files, globs, class-folder roots"),
    Flag("--image_root", "DIR", {},
         "folder that relative image paths (a COCO file's `file_name`s too) are under",
         "the manifest's folder", brief="base of relative image paths"),
    Flag("--split", "train=0.9,validation=0.1", {},
         "split for rows without a `split` value, from a hash of the key; with neither, rows "
         "are `train`", brief="split rows that have no split value by a hash of their key"),
    Flag("--label_map", "FILE", {},
         "pin label ids to a `labels.txt` (one name per line, id = line number + offset); a "
         "label missing from it is an error row",
         brief="fix label ids by a labels.txt, one name per line"),
    Flag("--label_offset", "K", INT,
         "first id for name labels (1 for the TPU ImageNet readers). Labels that are all "
         "integers are used as ids unchanged", "0, or `--preset`'s",
         brief="the first id given to name labels"),
    Flag("--max_labels", "N", INT,
         "the most distinct labels a run takes; more, or over 1,000 nearly one a row (an id or "
         "caption column), is refused before any image is read; giving it allows labels one a "
         "row. A label is at most 256 bytes (docs/inputs.md)",
         "100,000", brief="the most distinct labels a run takes"),
    Flag("--multi_label", "", SWITCH,
         "several labels an image: a CSV label cell is split on `--label_separator`, a JSONL "
         "or Parquet label may be a list (`[]`: none); records hold lists of ids and texts, "
         "and `load()` gives a multi-hot vector (docs/detection.md)",
         brief="several labels an image, a cell split on --label_separator"),
    Flag("--label_separator", "SEP", {},
         "what separates the labels of a CSV cell (or a JSONL string) with `--multi_label`",
         brief="what separates a cell's labels with --multi_label"),
    Flag("--feature", f"name:{'|'.join(FEATURE_TYPES)}", {"action": "append"},
         "add a manifest column as a scalar feature (repeatable)",
         brief="keep a manifest column as a feature (repeatable)"),
    Flag("--drop_negatives", "", SWITCH,
         "detection: an image with no objects is left out and counted (`negatives_dropped`), "
         "not written as a negative example", brief="detection: leave out images without objects"),
    Flag("--masks", "", SWITCH,
         "detection: write each object's mask (a COCO `segmentation`: polygons or RLE) as a PNG "
         "in `image/object/mask`, for Mask R-CNN; an object without one is a `bad_annotation` "
         "(docs/detection.md)",
         brief="detection: write each object's mask (a COCO segmentation)"),
    "output",
    Flag("--output", "DIR", {"required": True}, "output folder (local or `gs://`)",
         brief="the dataset root: versions/ and LATEST are written in it"),
    Flag("--preset", "|".join(PRESETS), _choices(PRESETS),
         "the conventions of the readers named: `tpu-imagenet` (the TPU reference ImageNet "
         "readers, which subtract 1 from the label) sets `--label_offset 1` and `--num_shards "
         "train=1024,validation=128`; a flag given too wins (docs/readers/tpu.md); its "
         "readers take one label an image, so `--multi_label` is refused",
         brief="the TPU ImageNet readers' label offset and shard counts"),
    Flag("--file_format", "|".join(FILE_FORMATS), _choices(FILE_FORMATS),
         "`array_record`: ArrayRecord shards (`group_size:1`) of the same records, read by index "
         "by Grain and TFDS (docs/output.md#arrayrecord-shards)", brief="array_record: for Grain"),
    Flag("--compression", "none|gzip", _choices(("none", "gzip")),
         'gzip shards are `.tfrecord.gz` (read with `compression_type="GZIP"`); TensorFlow '
         "Datasets cannot read them, so such a dataset has no TFDS files",
         brief="gzip shards are .tfrecord.gz"),
    Flag("--write_index", "", SWITCH,
         "write `index/<shard>.idx` for each shard: `offset size` per record, the index NVIDIA "
         "DALI's TFRecord reader takes (uncompressed shards only). In a folder of their own, so "
         "`<split>-*` matches the shards alone", brief="an index file per shard, for NVIDIA DALI"),
    Flag("--max_error_rate", "R", FLOAT,
         "above this share of rejected rows the version is not published and the exit status "
         "is 1", brief="publish only up to this share of rejected rows"),
    Flag("--run_key", "KEY", {},
         "an id its retries repeat (Airflow's `run_id`): if a version a run with this key "
         "published is still kept, nothing is converted or published, exit status 0 "
         "(docs/runners.md#run-keys)", brief="a retry of a run that published publishes nothing"),
    "images",
    Flag("--validate", "|".join(VALIDATE_MODES), _choices(VALIDATE_MODES),
         "both walk every JPEG marker up to EOI (truncation, a frame its scan data cannot fill, "
         "over 65,536 marker bytes) and decode every scan with libjpeg in strict mode (luma at "
         "1/8 scale: every coefficient read, few pixels made), refusing a JPEG it warns about, "
         "such as one whose scan data ends early however the file ends (docs/images.md#limits); "
         "`full` is kept as the same check"),
    Flag("--channels", "1|3", INT, "channels of stored images"),
    Flag("--jpeg_quality", "Q", INT, "quality when an image has to be re-encoded"),
    Flag("--max_pixels", "N", INT, "larger images are error rows (decompression bombs), "
         "checked from the header before decoding"),
    Flag("--max_decode_mb", "M", FLOAT,
         "an image whose decoding and conversion would hold more memory is an `image_too_large` "
         "row, estimated from its header before decoding (docs/images.md#limits)"),
    Flag("--max_scans", "N", INT, "a JPEG with more is a `too_many_scans` row (docs/images.md)"),
    Flag("--max_pixels_per_byte", "N", INT, "a JPEG whose frame claims more pixels a byte of "
         "scan data is a `too_compressed` row: a few bytes of arithmetic-coded data can claim a "
         "frame of hundreds of MB (docs/images.md#limits)"),
    Flag("--max_metadata_mb", "M", FLOAT,
         "a JPEG holding more bytes of APPn and COM segments and after its EOI, which pass "
         "through into its record, is a `too_much_metadata` row (docs/images.md#limits)"),
    Flag("--max_side", "N", INT, "downscale so the long side is at most N; never upscales"),
    Flag("--resize_short_side", "N", INT,
         "downscale so the short side is N (the ImageNet recipe); never upscales"),
    Flag("--resample", "FILTER", _choices(RESAMPLE_FILTERS),
         f"resampling filter for resizing: {', '.join(RESAMPLE_FILTERS)} (docs/images.md"
         "#resampling-filters)"),
    Flag("--exif_transpose", "", SWITCH,
         "also re-encode JPEGs that would pass through but carry an EXIF rotation"),
    Flag("--background", "white|black|R,G,B", {}, "colour alpha is composited onto"),
    Flag("--image_encoding", "|".join(ENCODINGS), _choices(ENCODINGS),
         "raw stores decoded uint8 pixels in `image/raw` (read with `tf.io.decode_raw` and the "
         "stored shape)"),
    Flag("--max_record_mb", "M", FLOAT,
         "larger records are error rows (TensorFlow's limit is 1 GiB per record here)"),
    Flag("--max_file_mb", "M", FLOAT,
         "larger image files are `file_too_large` rows, read no further than the limit "
         "(`gs://`: by the object's size, before reading) and left out of size estimates. 256 MB "
         "is above any photograph a camera writes (a 100-megapixel JPEG is 30–60 MB, its PNG "
         "150–200 MB) and far below a worker's memory, which holds a few images per thread; "
         "raise it for uncompressed scans (an 8-bit RGB TIFF at `--max_pixels` is 537 MB)"),
    Flag("--dedup", "", SWITCH, "a row whose image bytes repeat an earlier row's is a "
         "`duplicate_content` error (reads every image once more)"),
    "sharding",
    Flag("--num_shards", "N|split=N,...", {},
         "shards per split: N for every split, or a count for each split named",
         "by size, or `--preset`'s", brief="shards in each split"),
    Flag("--target_shard_mb", "M", FLOAT,
         "shard size aimed at when `--num_shards` does not give a split's count (estimated "
         "from a fixed sample of 64 file sizes per split); on Beam, larger shards are written "
         "in pieces of about this size",
         brief="shard size (MB) aimed at without --num_shards"),
    "runners",
    Flag("--threads", "N", INT, "image threads per shard writer (docs/runners.md)", "automatic"),
    Flag("--read_latency_ms", "MS", FLOAT, "the object store's time to first byte: automatic "
         "`--threads` keep enough `gs://` reads in flight to cover it (docs/runners.md)"),
    Flag("--processes", "N", INT, "local runs without Beam flags: shards written at once, by N "
         "worker processes (docs/runners.md)", "one per core"),
    Flag("--wait", "", SWITCH,
         "on Dataflow: wait for the job, then print its counters and the summary"),
    Flag("--no_progress", "", {"dest": "progress", "action": "store_false"}, "no progress bar"),
    Flag("--debug", "", SWITCH, "when a run fails with a fault (exit status 3), print its "
         "traceback; without it the traceback goes to a log file the error line names"),
    "refresh",
    Flag("--incremental", "", SWITCH,
         "refresh: keep the published version's records whose rows did not change (by "
         "fingerprint: docs/output.md) and convert only new and changed rows"),
    Flag("--freeze_labels", "", SWITCH,
         "a label the published version does not have is an `unknown_label` error, not a new id"),
    Flag("--keep_versions", "K", INT, "after publishing, delete the published versions beyond "
         "the K most recently published (the published one counts; a rollback publishes a "
         "version anew); 0 keeps every version"),
)  # fmt: skip


def default_text(flag: Flag, defaults: Mapping[str, Any]) -> str:
    """The default as a person reads it: `required`, `off` for a flag that is off unless given
    (`--no_progress` too, though it clears a True field), `none`, or the value."""
    if flag.default:
        return flag.default
    if flag.parse.get("required"):
        return "required"
    value = defaults[flag.dest]
    if isinstance(value, bool):
        return "off"
    if value is None or value == []:
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def synopsis(flag: Flag) -> str:
    """The flag with its value, as argparse writes it (`--manifest M [M ...]`)."""
    if not flag.value:  # a switch
        return flag.name
    more = f" [{flag.value} ...]" if flag.parse.get("nargs") == "+" else ""
    return f"{flag.name} {flag.value}{more}"


def help_text(flag: Flag, defaults: Mapping[str, Any]) -> str:
    """`--help`'s line: the meaning without Markdown, then the default."""
    default = default_text(flag, defaults)
    said = f"{flag.meaning} ({default if default == 'required' else 'default: ' + default})"
    return said.replace("`", "").replace("%", "%%")


def in_group(group: str) -> tuple[Flag, ...]:
    return tuple(flag for flag in FLAGS if flag.group == group)
