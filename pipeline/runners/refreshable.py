"""Whether `--incremental` can reuse the published version at all: the options that change
records must be those it was converted with, and it must have rows files. The refresh itself
is the conversion's (transforms/local/refresh.py, transforms/beam/refresh.py); this compares
recorded options, which only the pipeline knows the defaults of.
"""

import sys

from tfrecord_pipeline.config.options import normalised, option_defaults
from tfrecord_pipeline.dataset.previous import Previous

# Recorded options a refresh may differ in: they change no record's bytes (run_key: each night's
# run has its own).
# (label_offset: ids are inherited, and another offset is refused before any work; preset:
# it changes records only through the options it sets, which are compared themselves.)
FREE_OPTIONS = frozenset(
    (
        "num_shards",
        "target_shard_mb",
        "max_error_rate",
        "max_labels",
        "freeze_labels",
        "label_map",
        "label_offset",
        "preset",
        "run_key",
    )
)


def refreshable(previous: Previous | None, recorded: dict) -> bool:
    """Whether --incremental can reuse the published version; says why not when it cannot."""
    why = (
        why_not_refreshable(previous, recorded) if previous else "there is no published version yet"
    )
    if why:
        print(f"tfrecord-pipeline: --incremental: converting every row: {why}", file=sys.stderr)
    return not why


def why_not_refreshable(previous: Previous, recorded: dict) -> str | None:
    """Why the published version's records cannot be reused by a run with these options. An
    option the version's release did not have yet was, for it, what is now its default (a
    release that adds a flag leaves published versions refreshable)."""
    defaults = option_defaults()
    published = normalised(previous.info.options)  # as its values are spelled now
    differ = sorted(
        name
        for name in set(recorded) | set(published)
        if name not in FREE_OPTIONS
        and recorded.get(name) != published.get(name, defaults.get(name))
    )
    if differ:
        return f"options that change records differ from the published version's: {differ}"
    if any(not shard.rows for split in previous.info.splits.values() for shard in split.shards):
        return "the published version has no rows files (it was written before refreshes)"
    return None
