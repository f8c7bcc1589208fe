"""The raw-zone sensor against the real embedded S3 server."""

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.tags import RUN_KEY_TAG

from lake_assets.core.ledger import APPLIED, REJECTED, REVERTED, Ledger, LedgerEntry
from lake_assets_tests.helpers.insurance_tables import TABLE
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.declared import sensors
from lake_assets.sensors import discovery
from lake_assets.declared.sensors import FIRST_OBJECT_TAG, LAST_OBJECT_TAG, run_lookup, run_retag
from lake_assets_tests.helpers.insurance import insurance_sensor, raw_zone_tick

CDC_ROW = b"I,1,2024-01-01,Urban,NY,East,1,Retail,N,N\n"


def _tick(storage: LakeStorage, cursor: str | None):
    resource = StorageResource(bucket=storage.bucket, home=storage.home)  # embedded: found via LAKE_HOME
    with dg.build_sensor_context(cursor=cursor, resources={"storage": resource}) as context:
        return insurance_sensor()(context)


def _requests(result) -> list[dg.RunRequest]:
    return list(result.run_requests or []) if isinstance(result, dg.SensorResult) else []


def test_a_burst_of_new_objects_starts_one_run(storage: LakeStorage) -> None:
    first = _tick(storage, None)
    assert _requests(first) == []
    for n in range(5):
        storage.put_bytes(f"raw/cdcload/20240401-09000{n}000.csv", CDC_ROW)
    storage.put_bytes("raw/fullload/full.csv", b"policy_id\n")
    result = _tick(storage, first.cursor)
    [request] = _requests(result)
    assert request.tags["lake/objects"] == "6"
    assert (request.tags[FIRST_OBJECT_TAG], request.tags[LAST_OBJECT_TAG]) == \
        ("raw/cdcload/20240401-090000000.csv", "raw/fullload/full.csv")
    observed = {e.asset_key.to_user_string(): {k: v.value for k, v in e.metadata.items()} for e in result.asset_events}
    assert observed == {  # each raw source shows what landed in it
        "raw/insurance_cdc": {"objects_landed": 5, "bytes_landed": 5 * len(CDC_ROW), "prefix": "raw/cdcload/",
                              "newest_object": "raw/cdcload/20240401-090004000.csv"},
        "raw/insurance_fullload": {"objects_landed": 1, "bytes_landed": len(b"policy_id\n"), "prefix": "raw/fullload/",
                                   "newest_object": "raw/fullload/full.csv"}}
    quiet = _tick(storage, result.cursor)
    assert _requests(quiet) == [] and not quiet.asset_events  # seen: not requested again, nothing observed
    assert quiet.skip_reason is not None  # a skip, shown as one
    again = _tick(storage, first.cursor)  # the same tick evaluated twice asks for the same run
    assert [r.run_key for r in _requests(again)] == [request.run_key]


def test_a_redelivered_old_name_is_noticed_within_one_sweep_pass(storage: LakeStorage,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "SWEEP_PAGE", 2)
    names = [f"raw/cdcload/20240401-0900{n:02d}000.csv" for n in range(7)]
    for name in names:
        storage.put_bytes(name, CDC_ROW)
    cursor = _tick(storage, None).cursor
    time.sleep(1.1)
    bound = -(-len(names) // 2) + 1  # pages of cdcload, plus fullload's (empty) page
    for _ in range(bound):  # finish the first pass: it only learns where the zone stands
        result = _tick(storage, cursor)
        assert _requests(result) == []
        cursor = result.cursor
    time.sleep(2.5)  # past the overlap
    storage.put_bytes(names[1], b"U,1,2024-01-01,Urban,NY,East,2,Retail,N,N\n")  # new content, old name
    noticed = []
    for _ in range(bound):
        result = _tick(storage, cursor)
        noticed += _requests(result)
        cursor = result.cursor
    assert len(noticed) == 1 and noticed[0].tags[FIRST_OBJECT_TAG] == names[1]
    for _ in range(2 * bound):  # and only once, over the following passes
        result = _tick(storage, cursor)
        assert _requests(result) == []
        cursor = result.cursor


def test_the_cursor_does_not_grow_with_history(storage: LakeStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "SWEEP_PAGE", 50)
    attached = LakeStorage(bucket=storage.bucket, home=storage.home).attached()
    start = dt.datetime.now(dt.timezone.utc)
    cursor = None
    for batch in range(4):
        for n in range(50):
            storage.put_bytes(f"raw/cdcload/2024040{batch}-{n:06d}000.csv", CDC_ROW)
        for tick in range(6):  # an hour later each batch: earlier requests age out of the cursor
            now = start + dt.timedelta(hours=batch) + tick * 2 * discovery.CURSOR_OVERLAP  # ticks past the overlap
            result = raw_zone_tick(attached, cursor, now=now)
            cursor = result.cursor
    state = json.loads(cursor)
    assert len(state["requested"]) <= 50  # the last batch at most, not the 200 seen
    assert len(cursor) < 6000


def test_directory_placeholder_keys_are_ignored(storage: LakeStorage) -> None:
    storage.put_bytes("raw/cdcload/", b"")
    assert _requests(_tick(storage, None)) == []


def test_skips_when_the_embedded_server_is_not_running(tmp_path: Path) -> None:
    resource = StorageResource(bucket="lake", home=str(tmp_path))
    with dg.build_sensor_context(resources={"storage": resource}) as context:
        result = insurance_sensor()(context)
    assert isinstance(result, dg.SkipReason) and "not running" in result.skip_message


def test_non_csv_objects_start_no_run(storage: LakeStorage) -> None:
    for key in ("raw/cdcload/_SUCCESS", "raw/cdcload/.DS_Store", "raw/fullload/full.csv.gz"):
        storage.put_bytes(key, b"x")
    first = _tick(storage, None)
    assert _requests(first) == []
    storage.put_bytes("raw/cdcload/001.CSV", b"D,1,,,,,,,,\n")
    [request] = _requests(_tick(storage, first.cursor))
    assert request.tags[FIRST_OBJECT_TAG] == "raw/cdcload/001.CSV"


def test_a_dms_file_put_after_a_refused_name_is_requested_within_one_tick(storage: LakeStorage) -> None:
    """The reported sequence: `cdc-load.csv` sorted after every DMS name and hid them all."""
    cursor = _tick(storage, None).cursor
    storage.put_bytes("raw/cdcload/cdc-load.csv", CDC_ROW)
    result = _tick(storage, cursor)
    assert [r.tags[FIRST_OBJECT_TAG] for r in _requests(result)] == ["raw/cdcload/cdc-load.csv"]
    cursor = result.cursor
    for n, name in enumerate(("raw/cdcload/20240401-090000000.csv", "raw/cdcload/20240401-100000000.csv",
                              "raw/cdcload/manual-fix.csv", "raw/cdcload/20240402-090000000.csv")):
        storage.put_bytes(name, CDC_ROW + str(n).encode())
        result = _tick(storage, cursor)  # ONE tick, whatever the sweep is doing
        assert [(r.tags["lake/objects"], r.tags[FIRST_OBJECT_TAG]) for r in _requests(result)] == [("1", name)]
        cursor = result.cursor
    for _ in range(6):  # the names listed again on every tick are not requested again
        result = _tick(storage, cursor)
        assert _requests(result) == []
        cursor = result.cursor
    storage.put_bytes("raw/cdcload/cdc-load.csv", CDC_ROW + b"fixed")  # a re-delivery of such a name: at once
    assert [r.tags[FIRST_OBJECT_TAG] for r in _requests(_tick(storage, cursor))] == ["raw/cdcload/cdc-load.csv"]


def test_a_cursor_marked_by_a_non_dms_name_lists_its_prefix_again(storage: LakeStorage) -> None:
    """A cursor written before the fix, stuck after `cdc-load.csv`: the hidden file is found."""
    storage.put_bytes("raw/cdcload/cdc-load.csv", CDC_ROW)
    storage.put_bytes("raw/cdcload/20240401-090000000.csv", CDC_ROW)
    old = json.dumps({"after": {"raw/cdcload/": "raw/cdcload/cdc-load.csv"}, "sweep_prefix": 0, "sweep_token": None,
                      "pass_started": None, "since": None,
                      "requested": {"raw/cdcload/cdc-load.csv@x": dt.datetime.now(dt.timezone.utc).isoformat()}})
    [request] = _requests(_tick(storage, old))
    assert request.tags[FIRST_OBJECT_TAG] == "raw/cdcload/20240401-090000000.csv"


@pytest.fixture
def instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dg.DagsterInstance]:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dg.DagsterInstance.get() as instance:
        yield instance


@dg.op
def _nothing() -> None:
    pass


@dg.job
def requested_job() -> None:
    _nothing()


def _run(instance: dg.DagsterInstance, run_key: str, status: dg.DagsterRunStatus) -> dg.DagsterRun:
    """A run stored under `run_key`, as the daemon stores the run of a sensor's request."""
    return instance.create_run_for_job(requested_job, status=status, tags={RUN_KEY_TAG: run_key})


def test_a_file_its_run_did_not_apply_is_requested_again(storage: LakeStorage, instance: dg.DagsterInstance) -> None:
    attached = LakeStorage(bucket=storage.bucket, home=storage.home).attached()
    runs = run_lookup(instance)
    cursor = raw_zone_tick(attached, None, runs=runs).cursor
    refused = storage.put_bytes("raw/cdcload/cdc-load.csv", CDC_ROW)
    etag = storage.put_bytes("raw/cdcload/20240401-090000000.csv", CDC_ROW + b"2")
    result = raw_zone_tick(attached, cursor, runs=runs)
    [first] = _requests(result)
    run = _run(instance, first.run_key, dg.DagsterRunStatus.STARTED)
    cursor = result.cursor
    for _ in range(3):  # in flight: no second request
        result = raw_zone_tick(attached, cursor, runs=runs)
        assert _requests(result) == []
        cursor = result.cursor
    # the run refused cdc-load.csv (the ledger says so, as the pipeline writes it) and then failed
    Ledger(storage).record([LedgerEntry(TABLE, "raw/cdcload/cdc-load.csv", refused,
                                        len(CDC_ROW), "cdcload", REJECTED, 1, 0, 0, 1, None, run.run_id,
                                        dt.datetime.now(dt.timezone.utc), "no_sequence: ...")])
    instance.report_run_failed(run)
    result = raw_zone_tick(attached, cursor, runs=runs)
    [again] = _requests(result)
    assert again.run_key != first.run_key  # Dagster starts no run under a key it has seen
    assert (again.tags["lake/objects"], again.tags[FIRST_OBJECT_TAG]) == \
        ("1", "raw/cdcload/20240401-090000000.csv")
    assert json.loads(result.cursor)["runs"][again.run_key][1] == {f"raw/cdcload/20240401-090000000.csv@{etag}": 2}
    cursor, request = result.cursor, again
    for attempt in range(2, sensors.MAX_ATTEMPTS + 1):  # bounded: each attempt once its run is over
        _run(instance, request.run_key, dg.DagsterRunStatus.SUCCESS)  # ran, yet left the file pending
        result = raw_zone_tick(attached, cursor, runs=runs)
        cursor = result.cursor
        if attempt < sensors.MAX_ATTEMPTS:
            [request] = _requests(result)
        else:
            assert _requests(result) == []
    assert json.loads(cursor)["runs"] == {}


def test_a_request_dagster_dropped_is_requested_again(storage: LakeStorage, instance: dg.DagsterInstance) -> None:
    """No run under the key after the grace (Dagster drops a RunRequest whose run key it has seen)."""
    attached = LakeStorage(bucket=storage.bucket, home=storage.home).attached()
    runs, start = run_lookup(instance), dt.datetime.now(dt.timezone.utc)
    cursor = raw_zone_tick(attached, None, now=start, runs=runs).cursor
    storage.put_bytes("raw/cdcload/20240401-090000000.csv", CDC_ROW)
    [first] = _requests(result := raw_zone_tick(attached, cursor, now=start, runs=runs))
    waiting = raw_zone_tick(attached, result.cursor, now=start + sensors.RUN_GRACE / 2, runs=runs)
    assert _requests(waiting) == []
    [again] = _requests(raw_zone_tick(attached, waiting.cursor, now=start + sensors.RUN_GRACE, runs=runs))
    assert again.tags[FIRST_OBJECT_TAG] == "raw/cdcload/20240401-090000000.csv" and again.run_key != first.run_key


def test_a_first_tick_leaves_out_what_the_ledger_settled(storage: LakeStorage) -> None:
    """`lake demo` then `lake dev`: the sensor has no cursor; what runs applied starts no run."""
    applied = storage.put_bytes("raw/fullload/full-load.csv", b"policy_id\n")
    reverted = storage.put_bytes("raw/cdcload/20240401-090000000.csv", CDC_ROW)
    storage.put_bytes("raw/cdcload/20240402-090000000.csv", CDC_ROW + b"2")  # never applied
    now = dt.datetime.now(dt.timezone.utc)
    Ledger(storage).record([
        LedgerEntry(TABLE, key, etag, 1, "cdcload", status, 1, 1, 0, 0, 0, "a-run", now, None)
        for key, etag, status in [("raw/fullload/full-load.csv", applied, APPLIED),
                                  ("raw/cdcload/20240401-090000000.csv", reverted, REVERTED)]])
    result = _tick(storage, None)
    [request] = _requests(result)
    assert (request.tags["lake/objects"], request.tags[FIRST_OBJECT_TAG]) == \
        ("1", "raw/cdcload/20240402-090000000.csv")
    assert _requests(_tick(storage, result.cursor)) == []  # the settled ones are not requested later either
    changed = storage.put_bytes("raw/fullload/full-load.csv", b"policy_id\n1\n")  # a new ETag: not settled
    [again] = _requests(_tick(storage, result.cursor))
    assert again.tags[FIRST_OBJECT_TAG] == "raw/fullload/full-load.csv" and changed != applied


def test_new_objects_go_with_a_requested_run_that_has_not_started(storage: LakeStorage,
                                                                   instance: dg.DagsterInstance) -> None:
    """A run lists everything pending when it starts: objects found before it has started start
    no run of their own (it would find nothing left), and one it left pending is requested again."""
    attached = LakeStorage(bucket=storage.bucket, home=storage.home).attached()
    runs = run_lookup(instance)
    cursor = raw_zone_tick(attached, None, runs=runs).cursor
    applied = storage.put_bytes("raw/cdcload/20240401-090000000.csv", CDC_ROW)
    [first] = _requests(result := raw_zone_tick(attached, cursor, runs=runs))
    run = _run(instance, first.run_key, dg.DagsterRunStatus.NOT_STARTED)
    assert runs(first.run_key) == "waiting"
    later = storage.put_bytes("raw/cdcload/20240401-100000000.csv", CDC_ROW + b"2")
    riding = raw_zone_tick(attached, result.cursor, runs=runs, retag=run_retag(instance))
    assert _requests(riding) == [] and riding.skip_reason and "not started yet" in riding.skip_reason.skip_message
    assert [e.metadata["objects_landed"].value for e in riding.asset_events] == [1]  # still observed as landed
    assert json.loads(riding.cursor)["runs"][first.run_key][1] == {
        f"raw/cdcload/20240401-090000000.csv@{applied}": 1, f"raw/cdcload/20240401-100000000.csv@{later}": 1}
    tags = instance.get_run_by_id(run.run_id).tags  # the runs list counts both
    assert (tags["lake/objects"], tags[FIRST_OBJECT_TAG], tags[LAST_OBJECT_TAG]) == \
        ("2", "raw/cdcload/20240401-090000000.csv", "raw/cdcload/20240401-100000000.csv")
    # the run ends having applied only the first object: the one that went with it is requested again
    Ledger(storage).record([LedgerEntry(TABLE, "raw/cdcload/20240401-090000000.csv", applied, len(CDC_ROW),
                                        "cdcload", APPLIED, 1, 1, 0, 0, 1, run.run_id,
                                        dt.datetime.now(dt.timezone.utc))])
    instance.report_run_failed(run)
    [again] = _requests(raw_zone_tick(attached, riding.cursor, runs=runs))
    assert (again.tags["lake/objects"], again.tags[FIRST_OBJECT_TAG]) == ("1", "raw/cdcload/20240401-100000000.csv")


def test_a_started_run_does_not_take_new_objects_along(storage: LakeStorage, instance: dg.DagsterInstance) -> None:
    """A run that has started may have listed the zone already: new objects get a run of their own."""
    attached = LakeStorage(bucket=storage.bucket, home=storage.home).attached()
    runs = run_lookup(instance)
    cursor = raw_zone_tick(attached, None, runs=runs).cursor
    storage.put_bytes("raw/cdcload/20240401-090000000.csv", CDC_ROW)
    [first] = _requests(result := raw_zone_tick(attached, cursor, runs=runs))
    _run(instance, first.run_key, dg.DagsterRunStatus.STARTED)
    storage.put_bytes("raw/cdcload/20240401-100000000.csv", CDC_ROW + b"2")
    [second] = _requests(raw_zone_tick(attached, result.cursor, runs=runs))
    assert second.run_key != first.run_key and second.tags[FIRST_OBJECT_TAG] == "raw/cdcload/20240401-100000000.csv"
