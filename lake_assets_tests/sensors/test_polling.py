"""A raw-zone sensor tick keeps listing until something is new or its wait is over (sensors/polling.py)."""

import threading
import time

import dagster as dg

from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets_tests.helpers.insurance import insurance_sensor
from lake_assets.sensors.polling import poll
from lake_assets.sensors.tpcds import tpcds_sensor

CDC_ROW = b"I,1,2024-01-01,Urban,NY,East,1,Retail,N,N\n"


def _evaluate(sensor: dg.SensorDefinition, storage: LakeStorage, cursor: str | None):
    resource = StorageResource(bucket=storage.bucket, home=storage.home)
    with dg.build_sensor_context(cursor=cursor, resources={"storage": resource}) as context:
        return sensor(context)


def test_a_tick_sees_an_object_that_lands_while_it_waits(storage: LakeStorage) -> None:
    sensor = insurance_sensor(poll_seconds=0.2, wait_seconds=4)
    first = _evaluate(insurance_sensor(), storage, None)  # one look: the zone as it is
    landing = threading.Timer(1.0, storage.put_bytes, ("raw/cdcload/20240501-090000000.csv", CDC_ROW))
    started = time.monotonic()
    landing.start()
    result = _evaluate(sensor, storage, first.cursor)
    took = time.monotonic() - started
    landing.join()
    assert isinstance(result, dg.SensorResult) and len(result.run_requests or []) == 1
    assert 1.0 <= took < 4  # it returned with the object, before its wait was over


def test_a_tick_with_nothing_new_waits_its_wait_and_then_skips(storage: LakeStorage) -> None:
    first = _evaluate(tpcds_sensor(), storage, None)
    started = time.monotonic()
    result = _evaluate(tpcds_sensor(poll_seconds=0.3, wait_seconds=1.5), storage, first.cursor)
    assert 1.2 <= time.monotonic() - started < 3
    assert isinstance(result, dg.SensorResult) and not result.run_requests


def test_poll_threads_the_cursor_and_stops_at_a_request_or_a_skip() -> None:
    seen: list[str | None] = []

    def look(cursor: str | None) -> dg.SensorResult | dg.SkipReason:
        seen.append(cursor)
        if len(seen) == 3:
            return dg.SensorResult(run_requests=[dg.RunRequest(run_key="k")], cursor="c3")
        return dg.SensorResult(skip_reason="nothing new", cursor=f"c{len(seen)}")

    result = poll(look, "c0", poll_seconds=0.01, wait_seconds=5)
    assert seen == ["c0", "c1", "c2"] and isinstance(result, dg.SensorResult) and result.cursor == "c3"
    assert poll(lambda cursor: dg.SkipReason("no S3"), None, 0.01, 5) == dg.SkipReason("no S3")
    looks = []
    poll(lambda cursor: looks.append(cursor) or dg.SensorResult(cursor="x"), None, 0.01, 0)
    assert looks == [None]  # no wait: one look
