"""The raw-zone sensor against the real embedded S3 server."""

import json
import time
from pathlib import Path

import dagster as dg

from lake_assets.resources.storage import LakeStorage
from lake_assets.sensors.raw_files import raw_insurance_sensor


def _tick(storage: LakeStorage, cursor: str | None):
    resource = LakeStorage(bucket=storage.bucket, home=storage.home)  # embedded: found via LAKE_HOME
    context = dg.build_sensor_context(cursor=cursor, resources={"storage": resource})
    return raw_insurance_sensor(context)


def test_new_objects_start_one_run_each_with_a_run_key(storage: LakeStorage) -> None:
    first = _tick(storage, None)
    assert isinstance(first, dg.SkipReason)

    storage.put_bytes("raw/cdcload/002.csv", b"I,1,2024-01-01,Urban,NY,East,1,Retail,N,N\n")
    storage.put_bytes("raw/fullload/full.csv", b"policy_id\n")
    result = _tick(storage, None)
    assert [r.tags["lake/object"] for r in result.run_requests] == ["raw/cdcload/002.csv", "raw/fullload/full.csv"]
    etag = storage.list_objects("raw/cdcload/")[0]["ETag"].strip('"')
    assert result.run_requests[0].run_key == f"raw/cdcload/002.csv@{etag}"

    # The same objects are not requested again from the new cursor.
    again = _tick(storage, result.cursor)
    assert isinstance(again, dg.SkipReason)

    # A new object, and a re-delivery of an old name with new content, are.
    time.sleep(1.1)
    storage.put_bytes("raw/cdcload/003.csv", b"D,1,,,,,,,,\n")
    storage.put_bytes("raw/cdcload/002.csv", b"U,1,2024-01-01,Urban,NY,East,2,Retail,N,N\n")
    later = _tick(storage, result.cursor)
    keys = [r.run_key for r in later.run_requests]
    assert len(keys) == 2 and keys[0].startswith("raw/cdcload/002.csv@") and keys[0] != result.run_requests[0].run_key
    assert keys[1].startswith("raw/cdcload/003.csv@")
    assert json.loads(later.cursor)["last_modified"] >= json.loads(result.cursor)["last_modified"]


def test_directory_placeholder_keys_are_ignored(storage: LakeStorage) -> None:
    storage.put_bytes("raw/cdcload/", b"")
    assert isinstance(_tick(storage, None), dg.SkipReason)


def test_skips_when_the_embedded_server_is_not_running(tmp_path: Path) -> None:
    resource = LakeStorage(bucket="lake", home=str(tmp_path))
    result = raw_insurance_sensor(dg.build_sensor_context(resources={"storage": resource}))
    assert isinstance(result, dg.SkipReason) and "not running" in result.skip_message


def test_non_csv_objects_start_no_run(storage: LakeStorage) -> None:
    for key in ("raw/cdcload/_SUCCESS", "raw/cdcload/.DS_Store", "raw/fullload/full.csv.gz"):
        storage.put_bytes(key, b"x")
    assert isinstance(_tick(storage, None), dg.SkipReason)
    storage.put_bytes("raw/cdcload/001.CSV", b"D,1,,,,,,,,\n")
    assert [r.tags["lake/object"] for r in _tick(storage, None).run_requests] == ["raw/cdcload/001.CSV"]
