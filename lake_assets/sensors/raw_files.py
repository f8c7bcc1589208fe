"""Sensor on the raw zone: a new or re-delivered object starts a run that applies it."""

import contextlib
import datetime as dt
import json

import dagster as dg
from dagster_aws.s3.sensor import get_objects

from lake_assets.core.raw_zone import is_data_file
from lake_assets.insurance.pipeline import RAW_CDC, RAW_FULLLOAD
from lake_assets.jobs import apply_insurance_job
from lake_assets.resources.storage import LakeStorage
from lake_assets.runs import reap_dead_runs
from lake_assets.settings import LakeSettings

#: Objects written within this many seconds of the cursor are listed again: S3 timestamps
#: have one-second resolution, and run keys make the second look harmless.
CURSOR_OVERLAP = dt.timedelta(seconds=2)


def _run_key(obj: dict) -> str:
    return f"{obj['Key']}@{obj['ETag'].strip(chr(34))}"


@dg.sensor(
    job=apply_insurance_job,
    minimum_interval_seconds=LakeSettings.from_env().sensor_interval_seconds,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Lists {RAW_FULLLOAD} and {RAW_CDC}; one run per new (key, ETag).",
)
def raw_insurance_sensor(context: dg.SensorEvaluationContext, storage: LakeStorage) -> dg.SensorResult | dg.SkipReason:
    """Cursor: the newest LastModified seen, and the run keys seen in the overlap before it."""
    with contextlib.suppress(dg.DagsterInvariantViolationError):  # no instance: a unit test's context
        reap_dead_runs(context.instance)  # a killed run must not hold the table's run slot
    attached = storage.attached()
    if attached is None:
        return dg.SkipReason("the embedded S3 server is not running (start it with `lake dev`)")
    cursor = json.loads(context.cursor) if context.cursor else {}
    since = dt.datetime.fromisoformat(cursor["last_modified"]) - CURSOR_OVERLAP if cursor else None
    seen = set(cursor.get("recent", []))
    client = attached.get_client()
    listed = [
        o for prefix in (RAW_FULLLOAD, RAW_CDC)
        for o in get_objects(attached.bucket, prefix, since_last_modified=since, client=client)
        if is_data_file(o["Key"])  # not `_SUCCESS`, `.DS_Store`, ... nor `folder/` keys
    ]
    new = sorted((o for o in listed if _run_key(o) not in seen), key=lambda o: o["Key"])
    if not new:
        return dg.SkipReason("no new raw objects")
    newest = max(o["LastModified"] for o in listed)
    recent = [_run_key(o) for o in listed if o["LastModified"] > newest - CURSOR_OVERLAP - CURSOR_OVERLAP]
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=_run_key(o), tags={"lake/object": o["Key"]}) for o in new],
        cursor=json.dumps({"last_modified": newest.isoformat(), "recent": recent}),
    )
