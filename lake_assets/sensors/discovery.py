"""Discovery of new raw objects under a sensor's prefixes: what a tick lists costs what changed,
not the history (the number of objects already applied).


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
- **Follow-up** (the declared tables' sensor, declared/sensors.py): the cursor remembers each run it requested and the objects it was for.
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
(sensors/tpcds.py) runs it over its own prefixes, with the same guarantees.

"""

import datetime as dt
import email.utils
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

#: Keys the sweep lists per tick.
SWEEP_PAGE = 250
#: How much further back than the previous pass's start the sweep looks. S3 LastModified has
#: one-second resolution, and an object may become listable a while after the time it is
#: stamped with (a slow upload on a loaded machine): within this margin it is still seen.
#: Free: the page is listed anyway, and what was requested stays in the cursor as long.
CURSOR_OVERLAP = dt.timedelta(seconds=30)


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

