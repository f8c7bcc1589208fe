"""The TPC-DS sensor finds objects as the insurance sensor does: whatever names the raw zone
holds, a new object is seen within one tick (a day older than the newest, within one sweep pass)."""

import json
import time

import dagster as dg
import pytest

from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.sensors import discovery
from lake_assets.tpcds.schema import DIMENSIONS, RAW
from lake_assets.sensors.tpcds import TPCDS_ZONE, tpcds_sensor
from lake_assets_tests.helpers.tpcds import fact_key, generated, land_dimensions, land_facts, sold_dates


def _tick(storage: LakeStorage, cursor: str | None) -> dg.SensorResult:
    resource = StorageResource(bucket=storage.bucket, home=storage.home)  # embedded: found via LAKE_HOME
    with dg.build_sensor_context(cursor=cursor, resources={"storage": resource}) as context:
        result = tpcds_sensor()(context)
    assert isinstance(result, dg.SensorResult)
    return result


def _seen(before: str | None, after: str | None) -> set[str]:
    """Keys the tick from cursor `before` to `after` took as new (its cursor remembers them)."""
    old = set(json.loads(before)["requested"]) if before else set()
    return {object_id.rpartition("@")[0] for object_id in set(json.loads(after or "{}")["requested"]) - old}


def test_every_new_object_is_seen_within_one_tick_whatever_the_names(storage: LakeStorage) -> None:
    oracle = generated(0.01)
    days = sold_dates(oracle)
    first = _tick(storage, None)
    assert not first.run_requests
    cursor = first.cursor

    def tick(*expected: str) -> None:
        nonlocal cursor
        result = _tick(storage, cursor)
        assert _seen(cursor, result.cursor) == set(expected)
        assert len(result.run_requests or []) == (1 if expected else 0)
        cursor = result.cursor

    land_dimensions(storage, oracle)
    tick(*(RAW.dimension_key(name) for name in DIMENSIONS))
    land_facts(storage, oracle, [days[9]])
    tick(fact_key(days[9]))
    # a correction under a name that is not time-ordered, then DMS names sorting before it
    for name in ("fix.dat", "20240101-000000000.dat", "20240102-000000000.dat", "manual-2.dat"):
        storage.put_bytes(f"{RAW.corrections}{name}", b"D" + b"|" * 34 + b"\n")
        tick(f"{RAW.corrections}{name}")
    land_facts(storage, oracle, [None])  # the rows without a sold date: a name that sorts before every day
    tick(fact_key(None))
    land_facts(storage, oracle, [days[12]])
    tick(fact_key(days[12]))
    key = RAW.dimension_key(DIMENSIONS[0])
    storage.put_bytes(key, storage.get_bytes(key)[0] + b"")  # the same content again: nothing new
    tick()
    storage.put_bytes(f"{RAW.corrections}fix.dat", b"D" + b"|" * 34 + b"\nD" + b"|" * 34 + b"\n")  # re-delivered
    tick(f"{RAW.corrections}fix.dat")
    for _ in range(len(TPCDS_ZONE.prefixes) + 2):  # nothing new: no request, whatever the sweep lists
        tick()


def test_a_day_older_than_the_newest_is_seen_within_one_sweep_pass(storage: LakeStorage,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discovery, "SWEEP_PAGE", 2)
    oracle = generated(0.01)
    days = sold_dates(oracle)
    land_facts(storage, oracle, [days[5], days[9], days[12]])
    cursor = _tick(storage, None).cursor
    bound = len(TPCDS_ZONE.prefixes) + 2  # a page per prefix, two for the three days
    for _ in range(bound):  # finish the first pass: it only learns where the zone stands
        result = _tick(storage, cursor)
        assert not result.run_requests
        cursor = result.cursor
    time.sleep(1.1)
    land_facts(storage, oracle, [days[2]])  # sorts before the newest day: only the sweep lists it
    seen: set[str] = set()
    requests = 0
    for _ in range(bound):
        result = _tick(storage, cursor)
        seen |= _seen(cursor, result.cursor)
        requests += len(result.run_requests or [])
        cursor = result.cursor
    assert seen == {fact_key(days[2])} and requests == 1
