"""Sensor on the raw zone: new or re-delivered objects start ONE run that applies them all.

A tick's cost follows what changed, not the history (the number of files already applied):

- **New names**: per prefix, list only the keys after the greatest *time-ordered* key seen
  (S3 `StartAfter`). A key is time-ordered when its name below the prefix begins with a
  digit: DMS names (`YYYYMMDD-HHMMSSfff.csv`) and date folders (`2024/04/01/...`) sort by
  time, so a new delivery lists as one short page. Every other name (`cdc-load.csv`,
  `full.csv`, `_SUCCESS`: letters and `_` sort after digits) is listed again on every tick
  and compared with the ETags the cursor remembers for such names, so it is noticed at
  once and, above all, never becomes the `StartAfter` mark. (A name starting with `-` or
  `.` sorts before the digits: it never hides anything, and the sweep finds it.)
- **Everything else** (a re-delivered old name with new content, a late name that sorts
  before the greatest one): an amortised sweep lists ONE page (`SWEEP_PAGE` keys) of the
  raw zone per tick, resuming from the continuation token in the cursor, and takes the
  objects modified since the previous full pass began, both times read on the S3 server's
  clock (the `Date` of its listing), never the daemon's. Such an object is noticed within
  one pass: ceil(objects / SWEEP_PAGE) ticks (400 s for 100,000 objects at one tick a
  second).
- **Follow-up**: the cursor remembers each run it requested and the objects it was for.
  Once that run has finished (or Dagster never created it: a run key it had used before),
  the objects with no ledger entry yet are requested again, with a new run key, at most
  `MAX_ATTEMPTS` times. A run in flight is never requested twice.

Why a file could stay pending (the report: a DMS file put after a refused `cdc-load.csv`
waited 9 minutes while every tick said "no new raw objects"): the `StartAfter` mark was the
greatest key seen of ANY name. Once `cdc-load.csv` had been seen, every DMS name (`2...`
sorts before `c...`) was invisible to the new-name listing for good (reproduced: the mark
stays `raw/cdcload/cdc-load.csv`), which left each new file to the sweep alone, and the
sweep took it only if all went right once: it compared S3 LastModified, on the server's
clock, with a window on the daemon's clock that looked back 2 s (with the server 5 s behind,
the file was never requested: reproduced), so an object listable more than 2 s after its
stamp (a slow upload while a run held both cores) fell out of every window; and it asked
once: a request that did not end in the file applied (Dagster drops a RunRequest whose run
key the sensor used before -- the key came from key@ETag alone; a run that failed) was never
repeated. Each is closed above: the mark ignores such names, the window is on the server's
clock with a 30 s margin, and a run's leftovers are followed up.

The discovery (new names and the sweep, `discover`) is shared: the TPC-DS sensor
(tpcds/sensors.py) runs it over its own prefixes, with the same guarantees.

The cursor holds per prefix a key, the ETags of its non-time-ordered names and a token,
the objects requested during the current pass and the runs not yet followed up (bounded by
what arrives in one pass and by the runs in flight, not by history). One tick requests at
most one run (the run applies everything pending anyway); its run key is derived from the
objects it saw, so a tick evaluated twice starts nothing twice.
"""

import contextlib
import datetime as dt
import email.utils
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import dagster as dg

from lake_assets.core.ledger import APPROVED, Ledger
from lake_assets.core.raw_zone import is_data_file
from lake_assets.insurance.contract import TABLE
from lake_assets.insurance.raw_zone import RAW_CDC, RAW_FULLLOAD
from lake_assets.jobs import apply_insurance_job
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.runs import bookkeeping_tag, reap_dead_runs
from lake_assets.settings import LakeSettings

#: The tag Dagster's sensor daemon puts on the run it creates for a RunRequest's run key; written
#: out, not imported from Dagster's private modules (the sensor test creates runs with Dagster's
#: own constant, so it fails if the two differ).
RUN_KEY_TAG = "dagster/run_key"
PREFIXES = (RAW_FULLLOAD, RAW_CDC)
#: Keys the sweep lists per tick.
SWEEP_PAGE = 250
#: A run's tags: how many raw objects it was started for (shown in the runs list), and the
#: first and last of them (bookkeeping, out of sight).
OBJECTS_TAG = "lake/objects"
FIRST_OBJECT_TAG = bookkeeping_tag("first_object")
LAST_OBJECT_TAG = bookkeeping_tag("last_object")
#: How much further back than the previous pass's start the sweep looks. S3 LastModified has
#: one-second resolution, and an object may become listable a while after the time it is
#: stamped with (a slow upload on a loaded machine): within this margin it is still seen.
#: Free: the page is listed anyway, and what was requested stays in the cursor as long.
CURSOR_OVERLAP = dt.timedelta(seconds=30)
#: Requests of one object (key and ETag) whose runs ended without applying it.
MAX_ATTEMPTS = 3
#: A requested run Dagster has not created after this long was dropped (its run key was used before).
RUN_GRACE = dt.timedelta(seconds=60)

#: The state of the run with a given run key: "active", "finished", or None when there is none.
RunLookup = Callable[[str], str | None]


@dataclass
class Cursor:
    after: dict[str, str] = field(default_factory=dict)  # prefix -> greatest time-ordered key seen
    unordered: dict[str, dict[str, str]] = field(default_factory=dict)  # prefix -> {other data key: ETag}
    sweep_prefix: int = 0  # index into the zone's prefixes of the page the sweep lists next
    sweep_token: str | None = None  # its continuation token (None: the prefix's first page)
    pass_started: str | None = None  # when the current sweep pass began (ISO, the server's clock)
    since: str | None = None  # the sweep takes objects modified after this (the previous pass's start)
    requested: dict[str, str] = field(default_factory=dict)  # key@etag -> when requested, this pass and the last
    runs: dict[str, list] = field(default_factory=dict)  # run key -> [when requested, {key@etag: attempt}]

    @classmethod
    def load(cls, text: str | None) -> "Cursor":
        state = json.loads(text) if text else {}  # fields of another cursor (an older sensor's) are dropped
        cursor = cls(**{k: v for k, v in state.items() if k in cls.__dataclass_fields__})
        # a cursor written before time-ordered marks: its mark may be any name; list the prefix again
        cursor.after = {p: k for p, k in cursor.after.items() if time_ordered(p, k)}
        return cursor

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


@dataclass(frozen=True)
class Zone:
    """What a sensor watches: disjoint key prefixes, and which keys under them are data."""

    prefixes: tuple[str, ...]
    is_data: Callable[[str], bool]


INSURANCE_ZONE = Zone(PREFIXES, is_data_file)


def time_ordered(prefix: str, key: str) -> bool:
    """True if `key`'s name below `prefix` begins with a digit (a DMS name or a date folder)."""
    return key.removeprefix(prefix)[:1].isdigit()


def object_id(obj: dict) -> str:
    return f"{obj['Key']}@{obj['ETag'].strip(chr(34))}"


def _server_time(response: dict) -> dt.datetime | None:
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    return email.utils.parsedate_to_datetime(date) if date else None


def discover(client, bucket: str, cursor: Cursor, zone: Zone,  # a boto3 S3 client
             now: dt.datetime | None = None) -> tuple[list[dict], dt.datetime]:
    """The data objects of `zone` this tick lists as new or changed (new names, then one page of
    the sweep; see the module docstring), updating `cursor`; and the time of the tick (`now`,
    else the S3 server's clock). Objects already requested are the caller's to leave out."""
    listed, server_now = _new_names(client, bucket, cursor, zone)
    now = now or server_now or dt.datetime.now(dt.timezone.utc)
    listed += _sweep_page(client, bucket, cursor, now, zone.prefixes)
    return [o for o in listed if zone.is_data(o["Key"])], now


def _new_names(client, bucket: str, cursor: Cursor, zone: Zone) -> tuple[list[dict], dt.datetime | None]:
    """Objects after the time-ordered mark of each prefix that are new (all of them at first),
    and the server's time of the first listing."""
    found, server_now = [], None
    for prefix in zone.prefixes:
        options = {"Bucket": bucket, "Prefix": prefix}
        if prefix in cursor.after:
            options["StartAfter"] = cursor.after[prefix]
        listed = []
        for page in client.get_paginator("list_objects_v2").paginate(**options):
            server_now = server_now or _server_time(page)
            listed += page.get("Contents", [])
        ordered = [o for o in listed if time_ordered(prefix, o["Key"])]
        if ordered:
            cursor.after[prefix] = max(o["Key"] for o in ordered)
        known = cursor.unordered.get(prefix, {})
        others = {o["Key"]: o for o in listed if not time_ordered(prefix, o["Key"]) and zone.is_data(o["Key"])}
        cursor.unordered[prefix] = {k: o["ETag"].strip('"') for k, o in others.items()}
        found += ordered + [o for k, o in others.items() if known.get(k) != o["ETag"].strip('"')]
    return found, server_now


def _sweep_page(client, bucket: str, cursor: Cursor, now: dt.datetime, prefixes: tuple[str, ...]) -> list[dict]:
    """One page of the sweep; the objects on it modified since the previous pass began."""
    if cursor.pass_started is None:
        cursor.pass_started = now.isoformat()
    cursor.sweep_prefix %= len(prefixes)
    options = {"Bucket": bucket, "Prefix": prefixes[cursor.sweep_prefix], "MaxKeys": SWEEP_PAGE}
    if cursor.sweep_token:
        options["ContinuationToken"] = cursor.sweep_token
    page = client.list_objects_v2(**options)
    cursor.sweep_token = page.get("NextContinuationToken")
    if cursor.sweep_token is None:  # this prefix is done: the next one, or a new pass
        cursor.sweep_prefix = (cursor.sweep_prefix + 1) % len(prefixes)
        if cursor.sweep_prefix == 0:
            cursor.since, cursor.pass_started = cursor.pass_started, None
            horizon = dt.datetime.fromisoformat(cursor.since) - CURSOR_OVERLAP
            cursor.requested = {k: at for k, at in cursor.requested.items()
                                if dt.datetime.fromisoformat(at) >= horizon}
    if cursor.since is None:  # the first pass: the new-names listing has seen everything
        return []
    since = dt.datetime.fromisoformat(cursor.since) - CURSOR_OVERLAP
    return [o for o in page.get("Contents", []) if o["LastModified"] >= since]


def _follow_up(storage: LakeStorage, cursor: Cursor, runs: RunLookup, now: dt.datetime) -> dict[str, int]:
    """Objects (key@etag -> attempt) to request again: their run is over and left them pending.

    Reads the ledger only when a requested run has ended, so at most once per run.
    """
    over = {}
    for run_key, (at, objects) in list(cursor.runs.items()):
        state = runs(run_key)
        if state == "active" or (state is None and now - dt.datetime.fromisoformat(at) < RUN_GRACE):
            continue
        over.update(objects)
        del cursor.runs[run_key]
    if not over:
        return {}
    latest = Ledger(storage).latest(TABLE)
    client = storage.get_client()
    again = {}
    for object_id, attempt in over.items():
        key, _, etag = object_id.rpartition("@")
        entry = latest.get((key, etag))
        if attempt >= MAX_ATTEMPTS or (entry is not None and entry["status"] != APPROVED):
            continue
        try:
            current = client.head_object(Bucket=storage.bucket, Key=key)["ETag"].strip('"')
        except client.exceptions.ClientError:
            continue  # removed since
        if current == etag:
            again[object_id] = attempt + 1
    return again


def raw_zone_tick(storage: LakeStorage, cursor_text: str | None, now: dt.datetime | None = None,
                  runs: RunLookup | None = None) -> dg.SensorResult | dg.SkipReason:
    """One evaluation of the sensor against `storage` (an attached, running store).

    `now` defaults to the S3 server's clock; `runs` (the state of a run by run key) enables
    the follow-up of requested runs (the sensor passes the Dagster instance's).
    """
    cursor = Cursor.load(cursor_text)
    listed, now = discover(storage.get_client(), storage.bucket, cursor, INSURANCE_ZONE, now)
    new = {object_id(o): 1 for o in listed if object_id(o) not in cursor.requested}
    if runs is not None:
        new.update(_follow_up(storage, cursor, runs, now))
    if not new:
        return dg.SensorResult(skip_reason="no new raw objects", cursor=cursor.dump())
    cursor.requested.update({object_id: now.isoformat() for object_id in new})
    keys = sorted(object_id.rpartition("@")[0] for object_id in new)
    # a retried object's attempt is part of the key: Dagster starts no run under a key used before
    seen = sorted(object_id if attempt == 1 else f"{object_id}#{attempt}" for object_id, attempt in new.items())
    run_key = hashlib.sha256("\n".join(seen).encode()).hexdigest()[:24]
    if runs is not None:
        cursor.runs[run_key] = [now.isoformat(), new]
    tags = {OBJECTS_TAG: str(len(keys)), FIRST_OBJECT_TAG: keys[0], LAST_OBJECT_TAG: keys[-1]}
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=run_key, tags=tags)], cursor=cursor.dump())


def run_lookup(instance: dg.DagsterInstance) -> RunLookup:
    """The state of the newest run with a run key, from `instance`."""
    def state(run_key: str) -> str | None:
        found = instance.get_runs(filters=dg.RunsFilter(tags={RUN_KEY_TAG: run_key}), limit=1)
        if not found:
            return None
        return "finished" if found[0].is_finished else "active"
    return state


@dg.sensor(
    job=apply_insurance_job,
    minimum_interval_seconds=LakeSettings.from_env().sensor_interval_seconds,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Lists new names under {RAW_FULLLOAD} and {RAW_CDC} (S3 StartAfter the greatest time-ordered "
                f"name; other names every tick) plus one {SWEEP_PAGE}-key page of a sweep per tick; one run per "
                "tick for everything new; a file its run left pending is requested again. A re-delivered old "
                f"name is noticed within one sweep pass: ceil(objects / {SWEEP_PAGE}) ticks.",
)
def raw_insurance_sensor(context: dg.SensorEvaluationContext, storage: StorageResource) -> dg.SensorResult | dg.SkipReason:
    runs = None
    with contextlib.suppress(dg.DagsterInvariantViolationError):  # no instance: a unit test's context
        reap_dead_runs(context.instance)  # a killed run must not hold the table's run slot
        runs = run_lookup(context.instance)
    attached = storage.attached()
    if attached is None:
        return dg.SkipReason("the embedded S3 server is not running (start it with `lake dev`)")
    return raw_zone_tick(attached, context.cursor, runs=runs)
