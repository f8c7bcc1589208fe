"""Sensor on the raw zone: a new or re-delivered object starts a run that applies it."""

import datetime as dt
import json

import dagster as dg
from dagster_aws.s3.sensor import get_objects

from lake_assets.insurance.pipeline import RAW_CDC, RAW_FULLLOAD
from lake_assets.jobs import apply_insurance_job
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import LakeSettings

#: Objects written within this many seconds of the cursor are listed again: S3 timestamps
#: have one-second resolution, and run keys make the second look harmless.
CURSOR_OVERLAP = dt.timedelta(seconds=2)


@dg.sensor(
    job=apply_insurance_job,
    minimum_interval_seconds=LakeSettings.from_env().sensor_interval_seconds,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Lists {RAW_FULLLOAD} and {RAW_CDC}; one run per new (key, ETag).",
)
def raw_insurance_sensor(context: dg.SensorEvaluationContext, storage: LakeStorage) -> dg.SensorResult | dg.SkipReason:
    attached = storage.attached()
    if attached is None:
        return dg.SkipReason("the embedded S3 server is not running (start it with `lake dev`)")
    since = dt.datetime.fromisoformat(json.loads(context.cursor)["last_modified"]) - CURSOR_OVERLAP \
        if context.cursor else None
    client = attached.get_client()
    objects = [
        o for prefix in (RAW_FULLLOAD, RAW_CDC)
        for o in get_objects(attached.bucket, prefix, since_last_modified=since, client=client)
        if not o["Key"].endswith("/")
    ]
    if not objects:
        return dg.SkipReason("no new raw objects")
    objects.sort(key=lambda o: o["Key"])
    newest = max(o["LastModified"] for o in objects)
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(run_key=f"{o['Key']}@{o['ETag'].strip(chr(34))}", tags={"lake/object": o["Key"]})
            for o in objects
        ],
        cursor=json.dumps({"last_modified": newest.isoformat()}),
    )
