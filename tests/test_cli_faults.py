"""pipeline/cli/faults.py: a fault (the machine's, the network's, the store's) told from a bug
through the chain of causes. (Faults end to end, kills and full disks: test_faults.py.)"""

import errno

from tfrecord_pipeline.cli.faults import as_fault
from tfrecord_pipeline.transforms.errors import FaultError, UserError


def test_faults_are_told_from_bugs_through_the_chain_of_causes():
    from google.api_core import exceptions as api

    def raised(error, cause=None, suppress=False):
        try:
            try:
                raise cause or ValueError()
            except BaseException as inner:
                raise error from (None if suppress else inner)
        except BaseException as outer:
            return outer

    full = OSError(errno.ENOSPC, "No space left on device")
    # Beam re-raises a step's exception as a RuntimeError raised from it.
    assert "no space left" in str(as_fault(raised(RuntimeError("in a step"), full)))
    assert "quota" in str(as_fault(api.TooManyRequests("rate limit")))
    assert "kept failing" in str(as_fault(api.ServiceUnavailable("try again")))
    assert "kept failing" in str(as_fault(api.RetryError("deadline", api.BadGateway("x"))))
    assert as_fault(FaultError("killed")).args == ("killed",)
    for bug in (
        ValueError("a bug"),
        api.NotFound("no such object"),
        api.Forbidden("no permission"),
        OSError(errno.EACCES, "Permission denied"),
        raised(UserError("a mistake"), full, suppress=True),  # `from None` ends the chain
    ):
        assert as_fault(bug) is None, bug
