"""The command's logging: warnings and errors as `LEVEL logger: message`, without the chatter of
libraries that says nothing about the conversion."""

import logging

# Beam logs this as it is imported whenever apitools, which only its [gcp] extra installs, is
# missing: `pip install tfrecord-pipeline` leaves that extra out on purpose (the `dataflow`
# extra's), and a runner that needs it says so itself (pipeline/config/runner_choice.py).
_NO_APITOOLS = "apitools not found"


def _not_apitools_missing(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(_NO_APITOOLS)


def configure() -> None:
    """The command's logging set up; run again, it changes nothing."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().addFilter(_not_apitools_missing)  # Beam logs it on the root logger
    # Local worker processes forward start-up chatter (unused Beam flags, no staging folder)
    # as warnings; it says nothing about the conversion.
    logging.getLogger("apache_beam.runners.portability.local_job_service").setLevel(logging.ERROR)
    # Beam logs a failed step's exception with its traceback before re-raising it, and google-auth
    # warns that no GCE metadata server holds credentials: the command reports either itself.
    logging.getLogger("apache_beam.runners.common").setLevel(logging.CRITICAL)
    logging.getLogger("google.auth._default").setLevel(logging.ERROR)
