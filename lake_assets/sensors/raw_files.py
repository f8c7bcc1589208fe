"""Sensor on the raw zone: new or re-delivered objects start ONE run that applies them all.

A tick's cost follows what changed, not the history (the number of files already applied):

- **New names**: per prefix, list only the keys after the greatest key seen (S3
  `StartAfter`). DMS names (`YYYYMMDD-HHMMSSfff.csv`) and date folders sort by time, so a new
  delivery lists as one short page.
- **Everything else** (a re-delivered old name with new content, a new name that sorts
  before the greatest one): an amortised sweep lists ONE page (`SWEEP_PAGE` keys) of the
  raw zone per tick, resuming from the continuation token in the cursor, and takes the
  objects modified since the previous full pass began. Such an object is noticed within
  one pass: ceil(objects / SWEEP_PAGE) ticks (400 s for 100,000 objects at one tick a
  second).

The cursor holds a key and a token per prefix and the objects requested during the
current pass (bounded by what arrives in one pass, not by history). One tick requests at
most one run (the run applies everything pending anyway); its run key is derived from the
objects it saw, so a tick evaluated twice starts nothing twice.
"""

import contextlib
import datetime as dt
import hashlib
import json
from dataclasses import asdict, dataclass, field

import dagster as dg

from lake_assets.core.raw_zone import is_data_file
from lake_assets.insurance.raw_zone import RAW_CDC, RAW_FULLLOAD
from lake_assets.jobs import apply_insurance_job
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.runs import reap_dead_runs
from lake_assets.settings import LakeSettings

PREFIXES = (RAW_FULLLOAD, RAW_CDC)
#: Keys the sweep lists per tick.
SWEEP_PAGE = 250
#: S3 LastModified has one-second resolution: the sweep looks back this much further.
CURSOR_OVERLAP = dt.timedelta(seconds=2)


@dataclass
class Cursor:
    after: dict[str, str] = field(default_factory=dict)  # prefix -> greatest key seen
    sweep_prefix: int = 0  # index into PREFIXES of the page the sweep lists next
    sweep_token: str | None = None  # its continuation token (None: the prefix's first page)
    pass_started: str | None = None  # when the current sweep pass began (ISO)
    since: str | None = None  # the sweep takes objects modified after this (the previous pass's start)
    requested: dict[str, str] = field(default_factory=dict)  # key@etag -> when requested, this pass and the last

    @classmethod
    def load(cls, text: str | None) -> "Cursor":
        return cls(**json.loads(text)) if text else cls()

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


def _run_key(obj: dict) -> str:
    return f"{obj['Key']}@{obj['ETag'].strip(chr(34))}"


def _new_names(client, bucket: str, cursor: Cursor) -> list[dict]:  # a boto3 S3 client
    """Objects whose keys sort after the greatest key seen, per prefix (all of them at first)."""
    found = []
    for prefix in PREFIXES:
        options = {"Bucket": bucket, "Prefix": prefix}
        if prefix in cursor.after:
            options["StartAfter"] = cursor.after[prefix]
        listed = [o for page in client.get_paginator("list_objects_v2").paginate(**options)
                  for o in page.get("Contents", [])]
        if listed:
            cursor.after[prefix] = max(o["Key"] for o in listed)
        found += listed
    return found


def _sweep_page(client, bucket: str, cursor: Cursor, now: dt.datetime) -> list[dict]:
    """One page of the sweep; the objects on it modified since the previous pass began."""
    if cursor.pass_started is None:
        cursor.pass_started = now.isoformat()
    options = {"Bucket": bucket, "Prefix": PREFIXES[cursor.sweep_prefix], "MaxKeys": SWEEP_PAGE}
    if cursor.sweep_token:
        options["ContinuationToken"] = cursor.sweep_token
    page = client.list_objects_v2(**options)
    cursor.sweep_token = page.get("NextContinuationToken")
    if cursor.sweep_token is None:  # this prefix is done: the next one, or a new pass
        cursor.sweep_prefix = (cursor.sweep_prefix + 1) % len(PREFIXES)
        if cursor.sweep_prefix == 0:
            cursor.since, cursor.pass_started = cursor.pass_started, None
            horizon = dt.datetime.fromisoformat(cursor.since) - CURSOR_OVERLAP
            cursor.requested = {k: at for k, at in cursor.requested.items()
                                if dt.datetime.fromisoformat(at) >= horizon}
    if cursor.since is None:  # the first pass: the new-names listing has seen everything
        return []
    since = dt.datetime.fromisoformat(cursor.since) - CURSOR_OVERLAP
    return [o for o in page.get("Contents", []) if o["LastModified"] >= since]


def raw_zone_tick(storage: LakeStorage, cursor_text: str | None,
                  now: dt.datetime | None = None) -> dg.SensorResult | dg.SkipReason:
    """One evaluation of the sensor against `storage` (an attached, running store)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    cursor = Cursor.load(cursor_text)
    client = storage.get_client()
    listed = _new_names(client, storage.bucket, cursor) + _sweep_page(client, storage.bucket, cursor, now)
    new = {_run_key(o): o for o in listed if is_data_file(o["Key"]) and _run_key(o) not in cursor.requested}
    if not new:
        return dg.SensorResult(skip_reason="no new raw objects", cursor=cursor.dump())
    cursor.requested.update({key: now.isoformat() for key in new})
    keys = sorted(o["Key"] for o in new.values())
    run_key = hashlib.sha256("\n".join(sorted(new)).encode()).hexdigest()[:24]
    tags = {"lake/objects": str(len(keys)), "lake/first_object": keys[0], "lake/last_object": keys[-1]}
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=run_key, tags=tags)], cursor=cursor.dump())


@dg.sensor(
    job=apply_insurance_job,
    minimum_interval_seconds=LakeSettings.from_env().sensor_interval_seconds,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Lists new names under {RAW_FULLLOAD} and {RAW_CDC} (S3 StartAfter) plus one {SWEEP_PAGE}-key page "
                "of a sweep per tick; one run per tick for everything new. A re-delivered old name is noticed "
                f"within one sweep pass: ceil(objects / {SWEEP_PAGE}) ticks.",
)
def raw_insurance_sensor(context: dg.SensorEvaluationContext, storage: StorageResource) -> dg.SensorResult | dg.SkipReason:
    with contextlib.suppress(dg.DagsterInvariantViolationError):  # no instance: a unit test's context
        reap_dead_runs(context.instance)  # a killed run must not hold the table's run slot
    attached = storage.attached()
    if attached is None:
        return dg.SkipReason("the embedded S3 server is not running (start it with `lake dev`)")
    return raw_zone_tick(attached, context.cursor)
