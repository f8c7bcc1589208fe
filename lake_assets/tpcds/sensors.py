"""The TPC-DS raw-zone sensor: new objects under raw/tpcds/ start ONE run per tick.

The tick lists only what changed since its cursor (newest LastModified seen); if anything
is new, it asks the ledger what is pending and requests one run for all of it: new
dimension snapshots, the range of new days (single-run backfill), corrections.
"""

import datetime as dt
import json

import dagster as dg
from dagster_aws.s3.sensor import get_objects

from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.settings import LakeSettings
from lake_assets.tpcds.jobs import load_tpcds_job, pending_run_request
from lake_assets.tpcds.schema import RAW

#: S3 timestamps have one-second resolution: list again a little before the cursor.
CURSOR_OVERLAP = dt.timedelta(seconds=2)


def tpcds_tick(storage: LakeStorage, cursor: str | None) -> dg.SensorResult | dg.SkipReason:
    state = json.loads(cursor) if cursor else {}
    since = dt.datetime.fromisoformat(state["last_modified"]) - CURSOR_OVERLAP if state else None
    seen = set(state.get("recent", []))
    listed = [o for o in get_objects(storage.bucket, RAW.root, since_last_modified=since, client=storage.get_client())
              if not o["Key"].endswith("/")]
    new = [o for o in listed if f"{o['Key']}@{o['ETag']}" not in seen]
    if not new:
        return dg.SkipReason("no new TPC-DS raw objects")
    newest = max(o["LastModified"] for o in listed)
    recent = [f"{o['Key']}@{o['ETag']}" for o in listed if o["LastModified"] > newest - 2 * CURSOR_OVERLAP]
    request = pending_run_request(storage)
    next_cursor = json.dumps({"last_modified": newest.isoformat(), "recent": recent})
    if request is None:
        return dg.SensorResult(skip_reason="new objects, but nothing pending (already applied)", cursor=next_cursor)
    return dg.SensorResult(run_requests=[request], cursor=next_cursor)


@dg.sensor(
    job=load_tpcds_job,
    minimum_interval_seconds=LakeSettings.from_env().sensor_interval_seconds,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Lists {RAW.root}; one run per tick for every new object (days as one partition range).",
)
def raw_tpcds_sensor(context: dg.SensorEvaluationContext, storage: StorageResource) -> dg.SensorResult | dg.SkipReason:
    attached = storage.attached()
    if attached is None:
        return dg.SkipReason("the embedded S3 server is not running (start it with `lake dev`)")
    return tpcds_tick(attached, context.cursor)
