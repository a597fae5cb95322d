"""The `convert` command's options about images, sharding, runners and refreshes, each declared
once (the input and output groups, and what is made from them: pipeline/config/flags.py)."""

from tfrecord_pipeline.config.option import HERE, RUN, Option, grouped
from tfrecord_pipeline.config.runner_choice import MAX_PROCESSES
from tfrecord_pipeline.config.values import (
    FLOAT,
    INT,
    OFF_SWITCH,
    POSITIVE,
    SWITCH,
    TEXT,
    Check,
    between,
    choice,
)
from tfrecord_pipeline.transforms.image.config import (
    ENCODINGS,
    RESAMPLE_FILTERS,
    VALIDATE_LEVELS,
    VALIDATE_SPELLINGS,
    ImageConfig,
)
from tfrecord_pipeline.transforms.plan.sharding import ARCHIVE_ORDERS, DEFAULT_TARGET_SHARD_MB
from tfrecord_pipeline.transforms.tfrecord.records import MAX_RECORD_BYTES
from tfrecord_pipeline.transforms.write.shard_writer import (
    DEFAULT_MAX_FILE_MB,
    DEFAULT_READ_LATENCY_MS,
)

_IMAGE = ImageConfig()  # the image defaults live in one place: the workers' config
# A resize flag: None does not resize, and a side of 0 pixels or fewer would resize nothing.
_SIDE = Check(
    lambda side: side > 0,
    "takes a number of pixels, 1 or more (got {value}); leave it out not to resize",
)
_COUNT = Check(lambda count: count >= 0, "must be 0 (automatic) or more")

WORK = grouped(
    "images",
    Option("--validate", choice(VALIDATE_LEVELS, VALIDATE_SPELLINGS), _IMAGE.validate,
           "how much of each JPEG is checked before it is stored (docs/images.md#validation-levels)"
           ": `markers` walks its markers up to EOI (truncation, over 65,536 marker bytes) and "
           "weighs its frame against its scan data, in microseconds, for files you trust; `scans` "
           "also decodes every scan with libjpeg in strict mode at 1/8 scale (every coefficient "
           "read, few pixels made), refusing a JPEG it warns about, such as one whose scan data "
           "is corrupt or ends early; `pixels` decodes it strictly at full size, in its own "
           "colours, as `tf.io.decode_jpeg` will at training", value="|".join(VALIDATE_LEVELS)),
    Option("--channels", INT, _IMAGE.channels, "channels of stored images",
           Check(lambda n: n in (1, 3), "must be 1 or 3"), value="1|3"),
    Option("--jpeg_quality", INT, _IMAGE.jpeg_quality, "quality when an image has to be "
           "re-encoded", between(1, 100), value="Q"),
    Option("--max_pixels", INT, _IMAGE.max_pixels, "larger images are error rows (decompression "
           "bombs), checked from the header before decoding", POSITIVE, value="N"),
    Option("--max_decode_mb", FLOAT, _IMAGE.max_decode_bytes / 2**20,
           "an image whose decoding and conversion would hold more memory is an `image_too_large` "
           "row, estimated from its header before decoding (docs/images.md#limits)", POSITIVE,
           value="M"),
    Option("--max_scans", INT, _IMAGE.max_scans,
           "a JPEG with more is a `too_many_scans` row (docs/images.md)", POSITIVE, value="N"),
    Option("--max_pixels_per_byte", INT, _IMAGE.max_pixels_per_byte, "a JPEG whose frame claims "
           "more pixels a byte of scan data is a `too_compressed` row: a few bytes of "
           "arithmetic-coded data can claim a frame of hundreds of MB (docs/images.md#limits)",
           POSITIVE, value="N"),
    Option("--max_metadata_mb", FLOAT, _IMAGE.max_metadata_bytes / 2**20,
           "a JPEG holding more bytes of APPn and COM segments and after its EOI, which pass "
           "through into its record, is a `too_much_metadata` row (docs/images.md#limits)",
           POSITIVE, value="M"),
    Option("--max_side", INT, _IMAGE.max_side,
           "downscale so the long side is at most N; never upscales", _SIDE, value="N"),
    Option("--resize_short_side", INT, _IMAGE.resize_short_side,
           "downscale so the short side is N (the ImageNet recipe); never upscales", _SIDE,
           value="N"),
    Option("--resample", choice(RESAMPLE_FILTERS), _IMAGE.resample,
           f"resampling filter for resizing: {', '.join(RESAMPLE_FILTERS)} (docs/images.md"
           "#resampling-filters)", value="FILTER"),
    Option("--exif_transpose", SWITCH, _IMAGE.exif_transpose,
           "also re-encode JPEGs that would pass through but carry an EXIF rotation"),
    Option("--background", TEXT, "white", "colour alpha is composited onto",
           value="white|black|R,G,B"),  # checked as it is read: options.parse_colour
    Option("--image_encoding", choice(ENCODINGS), _IMAGE.encoding,
           "raw stores decoded uint8 pixels in `image/raw` (read with `tf.io.decode_raw` and the "
           "stored shape)", value="|".join(ENCODINGS)),
    Option("--max_record_mb", FLOAT, MAX_RECORD_BYTES / 2**20,
           "larger records are error rows (TensorFlow's limit is 1 GiB per record here)",
           Check(lambda mb: 0 < mb <= 1024, "must be in (0, 1024]"), value="M"),
    Option("--max_file_mb", FLOAT, DEFAULT_MAX_FILE_MB,
           "larger image files are `file_too_large` rows, read no further than the limit "
           "(`gs://`: by the object's size, before reading) and left out of size estimates. 256 MB "
           "is above any photograph a camera writes (a 100-megapixel JPEG is 30–60 MB, its PNG "
           "150–200 MB) and far below a worker's memory, which holds a few images per thread; "
           "raise it for uncompressed scans (an 8-bit RGB TIFF at `--max_pixels` is 537 MB)",
           Check(lambda mb: int(mb * 2**20) > 0, "must be positive"), value="M"),
    Option("--dedup", SWITCH, False, "a row whose image bytes repeat an earlier row's is a "
           "`duplicate_content` error (reads every image once more)"),
    "sharding",
    Option("--num_shards", TEXT, None,
           "shards per split: N for every split, or a count for each split named",
           value="N|split=N,...", said="by size, or `--preset`'s", brief="shard counts"),
    Option("--target_shard_mb", FLOAT, DEFAULT_TARGET_SHARD_MB,
           "shard size aimed at when `--num_shards` does not give a split's count (estimated "
           "from a fixed sample of 64 file sizes per split); on Beam, larger shards are written "
           "in pieces of about this size", POSITIVE,
           value="M"),
    Option("--archive_order", choice(ARCHIVE_ORDERS), "mix",
           "how archives' members are sharded (docs/inputs.md#archive-order): `mix`, by key hash "
           "as loose files are (classes mixed in every shard; a read a member); `keep`, in each "
           "archive's order, a shard a run of archives or a slice of one, read as one stream "
           "(WebDataset shards, shuffled when written; piles on `gs://`: a request a run, not a "
           "member)", value="|".join(ARCHIVE_ORDERS)),
    "runners",
    Option("--threads", INT, 0, "image threads per shard writer (docs/runners.md)", _COUNT,
           value="N", said="automatic", scope=RUN),
    Option("--read_latency_ms", FLOAT, DEFAULT_READ_LATENCY_MS, "the object store's time to "
           "first byte: automatic `--threads` keep enough `gs://` reads in flight to cover it "
           "(docs/runners.md)", between(0, 1000, "must be in [0, 1000]"), value="MS", scope=RUN),
    Option("--processes", INT, 0, "local runs without Beam flags: shards written at once, by N "
           "worker processes (docs/runners.md)",
           between(0, MAX_PROCESSES, f"must be 0 (automatic) to {MAX_PROCESSES:,}"),
           value="N", said="one per core", scope=HERE),
    Option("--wait", SWITCH, False,
           "on Dataflow: wait for the job, then print its counters and the summary", scope=HERE),
    Option("--no_progress", OFF_SWITCH, True, "no progress bar", scope=HERE, field="progress"),
    Option("--debug", SWITCH, False, "when a run fails with a fault (exit status 3), print its "
           "traceback; without it the traceback goes to a log file the error line names",
           scope=HERE),
    "refresh",
    Option("--incremental", SWITCH, False,
           "refresh: keep the published version's records whose rows did not change (by "
           "fingerprint: docs/output.md) and convert only new and changed rows", scope=RUN,
           brief="convert only new and changed rows"),
    Option("--freeze_labels", SWITCH, False,
           "a label the published version does not have is an `unknown_label` error, not a new id"),
    Option("--keep_versions", INT, 0, "after publishing, delete the published versions beyond "
           "the K most recently published (the published one counts; a rollback publishes a "
           "version anew); 0 keeps every version",
           Check(lambda k: k >= 0, "must be 0 (keep all) or more"), value="K", scope=RUN,
           brief="delete versions beyond the K newest"),
)  # fmt: skip
