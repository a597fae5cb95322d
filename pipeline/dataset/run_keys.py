"""`--run_key`: a run given the key of a run that published already publishes nothing.

A scheduler retries an attempt that it saw fail, and an attempt can publish and still be seen to
fail: killed after its pointer's write and before it exits (a task's SIGKILL, a worker lost), or
a Dataflow launch whose job published although the launch was reported failed. The key, the
same across a run's attempts (Airflow's `run_id`) and recorded in the version's metadata
(`options.run_key`), lets the next attempt find that version and stop before it reads a manifest.
The key names the run: its other flags are not compared.

Where it looks: the version published when the run started, then the versions the publication
records list (pipeline/dataset/history.py), the
most recently published first, each one's metadata read until one carries the key. A retry's
match is the newest or nearly: only publications of runs that overlapped it (another night, a
rollback) come after it. A key that is new reads every kept version's metadata, one small read
each: with the nightly's `--keep_versions 7`, seven. A version deleted by `--keep_versions` has
its record erased with it, so its key is not found any more and a run given that key converts
and publishes: that takes K later publications, long after any scheduler's retries.

Why two attempts with one key never both publish, however they overlap: the look is made after
the run's start (pipeline/dataset/publish.py `start`) fixed the publication it starts from. A
version with the key published before that start is the pointer the run started from or is
recorded (a record follows its pointer, under the same lock), so this look finds it; one
published after it is a publication since this run started, which this run's own publication
refuses (SupersededError, exit 4), and the retry that follows finds it. No second check is
needed at publish time: the pointer's lock (or lease) already decides.
"""

import sys

from tfrecord_pipeline.dataset import history
from tfrecord_pipeline.dataset.commit import read_info
from tfrecord_pipeline.dataset.metadata import INFO_FILE, DatasetInfo
from tfrecord_pipeline.dataset.publish import Target
from tfrecord_pipeline.dataset.versions import MARKER, VERSIONS
from tfrecord_pipeline.transforms.storage import fileio

# What a metadata file that is not one raises as it is read: JSON's errors and bytes that are
# not UTF-8 (ValueError), fields missing (KeyError) or of the wrong shape (TypeError, and
# AttributeError for options that are not an object).
DAMAGED = (ValueError, KeyError, TypeError, AttributeError)


def published_before(target: Target, key: str | None) -> tuple[DatasetInfo, str] | None:
    """The metadata and folder of the kept version a run given `key` published, if any, said
    in one line on stderr; None without a key. `target`: this run's, just started. A kept
    version whose metadata cannot be read (damaged by hand or by the disk) is passed over, said
    once: one damaged old file must not stop every night that passes a key."""
    if not key:
        return None
    unreadable = []
    recorded = history.newest_first(history.read_records(target.root))
    started_from = [target.base.version] if target.base else []
    for version in dict.fromkeys(started_from + recorded):
        folder = fileio.join(target.root, VERSIONS, version)
        try:
            info = read_info(folder)
            found = info.options.get("run_key")
        except fileio.MISSING:  # deleted by another run's --keep_versions since the listing?
            if fileio.exists(fileio.join(folder, MARKER)):  # no: by hand
                unreadable.append(f"{version} (missing)")
            continue
        except fileio.UNAVAILABLE:
            raise  # the store's failure, not the file's: a fault
        except (*DAMAGED, *fileio.READ_ERRORS) as error:
            unreadable.append(f"{version} ({type(error).__name__})")
            continue
        if found == key:
            print(
                f"tfrecord-pipeline: --run_key {key} was published already, as {version}: "
                "nothing converted, nothing published",
                file=sys.stderr,
            )
            return info, folder
    if unreadable:
        print(
            f"tfrecord-pipeline: warning: the metadata ({INFO_FILE}) of {', '.join(unreadable)} "
            f"cannot be read, so whether it was run with --run_key {key} is unknown; converting",
            file=sys.stderr,
        )
    return None
