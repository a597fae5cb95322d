"""transforms/storage/leases.py against the emulator, through the fault proxy, which answers
generation preconditions as Cloud Storage does (the emulator ignores them)."""

import time

import pytest

from tfrecord_pipeline.transforms.storage import leases


def test_a_lease_is_held_by_one_taker_at_a_time_and_taken_over_only_once_expired(
    tmp_path, gcs, faulty_gcs
):
    faulty_gcs(f"{tmp_path.name}/")
    path = f"gs://tfrp-test/{tmp_path.name}/_lease"
    first = leases.take(path, seconds=30)
    assert leases.is_live(path) and not leases.found(path).expired
    leases.renew(first)
    assert not first.lost and leases.found(path).renewal == 2
    stale = leases.Lease(path, 30)
    assert not stale.write(0) and not stale.write(first.generation - 1)  # held: refused
    leases.give_back(first)
    assert leases.found(path) is None
    short = leases.take(path, seconds=0.5)
    while not leases.found(path).expired:
        time.sleep(0.1)
    taker = leases.take(path, seconds=30)  # over the expired one
    leases.renew(short)
    assert short.lost and leases.found(path).holder == taker.holder
    with pytest.raises(leases.LeaseLostError):
        short.check()


def test_a_lease_whose_answer_was_lost_is_its_takers_and_held_on(tmp_path, gcs, faulty_gcs):
    """The write that takes a lease, and one that renews it, take effect and lose their
    answers: sent again, each is refused (412), and the holder finds its own write there."""
    path = f"gs://tfrp-test/{tmp_path.name}/_lease"
    proxy = faulty_gcs(
        f"{tmp_path.name}/", first_upload={path.removeprefix("gs://tfrp-test/"): "truncate"}
    )
    lease = leases.take(path, seconds=30)
    assert proxy.faults["truncate"] == 1 and lease.renewal == 1  # its first write, not a retake
    assert leases.found(path).holder == lease.holder
    proxy.first_upload[path.removeprefix("gs://tfrp-test/")] = "truncate"
    leases.renew(lease)
    assert proxy.faults["truncate"] == 2 and not lease.lost and lease.renewal == 2
    assert leases.found(path).generation == lease.generation
    lease.check()
    leases.give_back(lease)
    assert leases.found(path) is None
