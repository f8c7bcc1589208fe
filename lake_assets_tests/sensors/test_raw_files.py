"""The raw-zone sensor against the real embedded S3 server."""

import datetime as dt
import json
import time
from pathlib import Path

import dagster as dg
import pytest

from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.sensors import raw_files
from lake_assets.sensors.raw_files import raw_insurance_sensor, raw_zone_tick

CDC_ROW = b"I,1,2024-01-01,Urban,NY,East,1,Retail,N,N\n"


def _tick(storage: LakeStorage, cursor: str | None):
    resource = StorageResource(bucket=storage.bucket, home=storage.home)  # embedded: found via LAKE_HOME
    context = dg.build_sensor_context(cursor=cursor, resources={"storage": resource})
    return raw_insurance_sensor(context)


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
    assert (request.tags["lake/first_object"], request.tags["lake/last_object"]) == \
        ("raw/cdcload/20240401-090000000.csv", "raw/fullload/full.csv")
    assert _requests(_tick(storage, result.cursor)) == []  # seen: not requested again
    again = _tick(storage, first.cursor)  # the same tick evaluated twice asks for the same run
    assert [r.run_key for r in _requests(again)] == [request.run_key]


def test_a_redelivered_old_name_is_noticed_within_one_sweep_pass(storage: LakeStorage,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raw_files, "SWEEP_PAGE", 2)
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
    assert len(noticed) == 1 and noticed[0].tags["lake/first_object"] == names[1]
    for _ in range(2 * bound):  # and only once, over the following passes
        result = _tick(storage, cursor)
        assert _requests(result) == []
        cursor = result.cursor


def test_the_cursor_does_not_grow_with_history(storage: LakeStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raw_files, "SWEEP_PAGE", 50)
    attached = LakeStorage(bucket=storage.bucket, home=storage.home).attached()
    start = dt.datetime.now(dt.timezone.utc)
    cursor = None
    for batch in range(4):
        for n in range(50):
            storage.put_bytes(f"raw/cdcload/2024040{batch}-{n:06d}000.csv", CDC_ROW)
        for tick in range(6):  # an hour later each batch: earlier requests age out of the cursor
            result = raw_zone_tick(attached, cursor, now=start + dt.timedelta(hours=batch, seconds=tick))
            cursor = result.cursor
    state = json.loads(cursor)
    assert len(state["requested"]) <= 50  # the last batch at most, not the 200 seen
    assert len(cursor) < 6000


def test_directory_placeholder_keys_are_ignored(storage: LakeStorage) -> None:
    storage.put_bytes("raw/cdcload/", b"")
    assert _requests(_tick(storage, None)) == []


def test_skips_when_the_embedded_server_is_not_running(tmp_path: Path) -> None:
    resource = StorageResource(bucket="lake", home=str(tmp_path))
    result = raw_insurance_sensor(dg.build_sensor_context(resources={"storage": resource}))
    assert isinstance(result, dg.SkipReason) and "not running" in result.skip_message


def test_non_csv_objects_start_no_run(storage: LakeStorage) -> None:
    for key in ("raw/cdcload/_SUCCESS", "raw/cdcload/.DS_Store", "raw/fullload/full.csv.gz"):
        storage.put_bytes(key, b"x")
    first = _tick(storage, None)
    assert _requests(first) == []
    storage.put_bytes("raw/cdcload/001.CSV", b"D,1,,,,,,,,\n")
    [request] = _requests(_tick(storage, first.cursor))
    assert request.tags["lake/first_object"] == "raw/cdcload/001.CSV"
