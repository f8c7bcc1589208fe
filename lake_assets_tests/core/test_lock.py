"""The per-table write lease against the real S3 server: exclusion, waiting, take-over, renewal."""

import json
import subprocess
import sys
import threading
import time

import pytest

from lake_assets.core.lock import LockOwner, TableLocked, acquire, lock_key, read_lease, table_lock
from lake_assets.resources.storage import LakeStorage


def test_writers_never_overlap(storage: LakeStorage) -> None:
    holders, overlaps, done = [], [], []

    def writer(n: int) -> None:
        for _ in range(3):
            with table_lock(storage, "insurance", owner=LockOwner.current(f"run-{n}"), wait_seconds=60):
                holders.append(n)
                overlaps.append(len(holders))
                time.sleep(0.05)
                holders.remove(n)
        done.append(n)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(done) == [0, 1, 2, 3]
    assert len(overlaps) == 12 and max(overlaps) == 1
    assert read_lease(storage, "insurance") is None  # released


def test_a_waiter_gives_up_naming_the_holder(storage: LakeStorage) -> None:
    with table_lock(storage, "insurance", owner=LockOwner("run-a", 1, "elsewhere")):
        started = time.monotonic()
        with pytest.raises(TableLocked, match="run run-a \\(pid 1 on elsewhere\\)"):
            acquire(storage, "insurance", LockOwner.current("run-b"), wait_seconds=1)
        assert 1 <= time.monotonic() - started < 5
    with table_lock(storage, "insurance", wait_seconds=0):  # free again
        pass


def test_other_tables_are_not_blocked(storage: LakeStorage) -> None:
    with table_lock(storage, "insurance"), table_lock(storage, "web_sales", wait_seconds=0):
        pass


def test_an_expired_lease_is_taken_over(storage: LakeStorage) -> None:
    silent = acquire(storage, "insurance", LockOwner("run-a", 1, "another-host"), ttl=1)
    silent._stop.set()  # the holder hangs: no more renewals
    started = time.monotonic()
    with table_lock(storage, "insurance", owner=LockOwner.current("run-b"), wait_seconds=30) as lease:
        assert 0.5 < time.monotonic() - started < 10
        record, _ = read_lease(storage, "insurance")
        assert record.owner.run_id == "run-b" and lease.record.token == record.token
        silent.renew()  # the old holder wakes up: its conditional renewal must not win
        assert silent.lost
        with pytest.raises(Exception, match="lost the write lock"):
            silent.check()
        assert read_lease(storage, "insurance")[0].owner.run_id == "run-b"
    silent.release()  # a late release removes nothing
    assert read_lease(storage, "insurance") is None


def test_a_dead_holder_on_this_host_is_taken_over_at_once(storage: LakeStorage) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    acquire(storage, "insurance", LockOwner("run-dead", child.pid, LockOwner.current("x").host))._stop.set()
    started = time.monotonic()
    with table_lock(storage, "insurance", wait_seconds=30):
        assert time.monotonic() - started < 3


def test_the_heartbeat_renews_the_lease(storage: LakeStorage) -> None:
    with table_lock(storage, "insurance", ttl=0.6) as lease:
        first_expiry = lease.record.expires_at
        time.sleep(1.5)  # longer than the TTL: without renewals the lease would be free
        assert lease.renewals >= 2 and lease.record.expires_at > first_expiry
        with pytest.raises(TableLocked):
            acquire(storage, "insurance", LockOwner.current("intruder"), wait_seconds=0.5)
    body = storage.get_client().list_objects_v2(Bucket=storage.bucket, Prefix=lock_key("insurance"))
    assert body.get("KeyCount", 0) == 0


def test_the_lease_body_says_who_holds_it(storage: LakeStorage) -> None:
    with table_lock(storage, "insurance", owner=LockOwner.current("run-42")):
        body = json.loads(storage.get_bytes(lock_key("insurance"))[0])
        assert body["owner"]["run_id"] == "run-42" and body["table"] == "insurance"
        assert body["expires_at"] > body["acquired_at"] and body["expires_at_utc"].endswith("+00:00")
