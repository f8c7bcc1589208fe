"""A declared table's raw-zone sensor: new or re-delivered objects start ONE run that applies them all.

Objects are found by `discover` (sensors/discovery.py). The cursor also remembers each run
it requested and the objects it was for; once that run has finished (or Dagster never
created it: a run key it had used before), the objects with no ledger entry yet are
requested again, with a new run key, at most `MAX_ATTEMPTS` times. A run in flight is never
requested twice. New objects found while a requested run has not started yet (queued, or
requested and not yet created) start no run of their own: that run lists everything pending
when it starts, so they go with it, and are in its objects for the follow-up (a run of their
own would find nothing left to apply). A sensor with no cursor yet (the first tick after `lake run` or `lake demo`)
lists every object: those the ledger has settled are left out. One tick requests at most one run (the run applies everything pending
anyway); its run key is derived from the objects it saw, so a tick evaluated twice starts
nothing twice.
"""

import contextlib
import datetime as dt
import hashlib
from collections.abc import Callable
from typing import Any

import dagster as dg

from lake_assets.core.declaration import TableDeclaration
from lake_assets.declared.assets import raw_key
from lake_assets.core.ledger import APPROVED, Ledger
from lake_assets.core.raw_zone import is_data_file
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.runs import bookkeeping_tag, reap_dead_runs
from lake_assets.sensors.discovery import SWEEP_PAGE, Cursor, Zone, discover, object_id
from lake_assets.sensors.polling import poll

#: The tag Dagster's sensor daemon puts on the run it creates for a RunRequest's run key; written
#: out, not imported from Dagster's private modules (the sensor test creates runs with Dagster's
#: own constant, so it fails if the two differ).
RUN_KEY_TAG = "dagster/run_key"
#: A run's tags: how many raw objects it was started for (shown in the runs list), and the
#: first and last of them (bookkeeping, out of sight).
OBJECTS_TAG = "lake/objects"
FIRST_OBJECT_TAG = bookkeeping_tag("first_object")
LAST_OBJECT_TAG = bookkeeping_tag("last_object")
#: Requests of one object (key and ETag) whose runs ended without applying it.
MAX_ATTEMPTS = 3
#: A requested run Dagster has not created after this long was dropped (its run key was used before).
RUN_GRACE = dt.timedelta(seconds=60)

#: The state of the run with a given run key: "waiting" (not started: it has not listed the raw
#: zone yet), "active", "finished", or None when there is none.
RunLookup = Callable[[str], str | None]
#: Sets tags of the run with a given run key (if Dagster has created it).
RunRetag = Callable[[str, dict[str, str]], None]
#: Dagster's states of a run that has not started executing.
_NOT_STARTED = (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING)


def zone(declaration: TableDeclaration) -> Zone:
    """The raw zone of a declared table: its sources' prefixes, data files only (each source's suffix)."""

    def is_data(key: str) -> bool:
        source = declaration.source(key)
        return source is not None and is_data_file(key, source.suffix)

    return Zone(tuple(s.prefix for s in declaration.sources), is_data)


def _follow_up(storage: LakeStorage, table: str, cursor: Cursor, runs: RunLookup,
               now: dt.datetime) -> dict[str, int]:
    """Objects (key@etag -> attempt) to request again: their run is over and left them pending.

    Reads the ledger only when a requested run has ended, so at most once per run.
    """
    over = {}
    for run_key, (at, objects) in list(cursor.runs.items()):
        state = runs(run_key)
        if state in ("waiting", "active") or (state is None and now - dt.datetime.fromisoformat(at) < RUN_GRACE):
            continue
        over.update(objects)
        del cursor.runs[run_key]
    if not over:
        return {}
    latest = Ledger(storage).latest(table)
    client = storage.get_client()
    again = {}
    for requested, attempt in over.items():
        key, _, etag = requested.rpartition("@")
        entry = latest.get((key, etag))
        if attempt >= MAX_ATTEMPTS or (entry is not None and entry["status"] != APPROVED):
            continue
        try:
            current = client.head_object(Bucket=storage.bucket, Key=key)["ETag"].strip('"')
        except client.exceptions.ClientError:
            continue  # removed since
        if current == etag:
            again[requested] = attempt + 1
    return again


def _settled(storage: LakeStorage, table: str, objects: dict[str, int]) -> set[str]:
    """Of `objects` (key@etag), those no run takes in (the ledger's `settled`: applied,
    refused or reverted), which a sensor starting with no cursor lists with the rest: after
    `lake run` or `lake demo`, its first tick must not request a run for them again."""
    settled = Ledger(storage).settled(table)
    return {seen for seen in objects if tuple(seen.rsplit("@", 1)) in settled}


def raw_zone_tick(declaration: TableDeclaration, storage: LakeStorage, cursor_text: str | None,
                  now: dt.datetime | None = None, runs: RunLookup | None = None,
                  retag: RunRetag | None = None) -> dg.SensorResult | dg.SkipReason:
    """One evaluation of the table's sensor against `storage` (an attached, running store).

    `now` defaults to the S3 server's clock; `runs` (the state of a run by run key) enables
    the follow-up of requested runs (the sensor passes the Dagster instance's), and `retag`
    counts the objects that go with a run that has not started in its tags.
    """
    cursor = Cursor.load(cursor_text)
    listed, now = discover(storage.get_client(), storage.bucket, cursor, zone(declaration), now)
    new = {object_id(o): 1 for o in listed if object_id(o) not in cursor.requested}
    if cursor_text is None and new:  # the first tick lists every object: leave out what runs already applied
        done = _settled(storage, declaration.table_name, new)
        cursor.requested.update({seen: now.isoformat() for seen in done})
        new = {seen: attempt for seen, attempt in new.items() if seen not in done}
    if runs is not None:
        new.update(_follow_up(storage, declaration.table_name, cursor, runs, now))
    if not new:
        return dg.SensorResult(skip_reason="no new raw objects", cursor=cursor.dump())
    cursor.requested.update({seen: now.isoformat() for seen in new})
    landed = list({object_id(o): o for o in listed if object_id(o) in new}.values())  # the sweep lists some again
    waiting = None if runs is None else _not_started(cursor, runs, now)
    if waiting is not None:
        cursor.runs[waiting][1].update(new)
        if retag is not None:  # the runs list and `lake dev` count the objects the run was started for
            retag(waiting, _object_tags(cursor.runs[waiting][1]))
        return dg.SensorResult(skip_reason=f"{len(new)} new raw object(s) go with the requested run that has not "
                                           "started yet", cursor=cursor.dump(),
                               asset_events=source_observations(declaration, landed))
    # a retried object's attempt is part of the key: Dagster starts no run under a key used before
    seen = sorted(found if attempt == 1 else f"{found}#{attempt}" for found, attempt in new.items())
    run_key = hashlib.sha256("\n".join(seen).encode()).hexdigest()[:24]
    if runs is not None:
        cursor.runs[run_key] = [now.isoformat(), new]
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=run_key, tags=_object_tags(new))], cursor=cursor.dump(),
                           asset_events=source_observations(declaration, landed))


def _object_tags(objects: dict[str, int]) -> dict[str, str]:
    """A run's tags for the objects (key@etag) it is for: how many, the first and the last key."""
    keys = sorted(seen.rpartition("@")[0] for seen in objects)
    return {OBJECTS_TAG: str(len(keys)), FIRST_OBJECT_TAG: keys[0], LAST_OBJECT_TAG: keys[-1]}


def _not_started(cursor: Cursor, runs: RunLookup, now: dt.datetime) -> str | None:
    """The run key of a requested run that has not started yet (queued, or not yet created by
    Dagster within `RUN_GRACE`), or None."""
    for run_key, (at, _) in cursor.runs.items():
        state = runs(run_key)
        if state == "waiting" or (state is None and now - dt.datetime.fromisoformat(at) < RUN_GRACE):
            return run_key
    return None


def source_observations(declaration: TableDeclaration, landed: list[dict]) -> list[dg.AssetObservation]:
    """An observation of each raw source (`raw/<table>_<source>`) that new objects landed in:
    how many, their bytes and the newest (by name), so the source shows when it was last seen
    with what. Logged only when a tick requests a run: a quiet zone logs nothing."""
    observations = []
    for source in declaration.sources:
        mine = sorted((o for o in landed if o["Key"].startswith(source.prefix)), key=lambda o: o["Key"])
        if mine:
            observations.append(dg.AssetObservation(asset_key=raw_key(declaration, source.kind), metadata={
                "objects_landed": len(mine), "bytes_landed": sum(int(o["Size"]) for o in mine),
                "newest_object": mine[-1]["Key"], "prefix": source.prefix}))
    return observations


def run_lookup(instance: dg.DagsterInstance) -> RunLookup:
    """The state of the newest run with a run key, from `instance`."""
    def state(run_key: str) -> str | None:
        found = instance.get_runs(filters=dg.RunsFilter(tags={RUN_KEY_TAG: run_key}), limit=1)
        if not found:
            return None
        return "finished" if found[0].is_finished else "waiting" if found[0].status in _NOT_STARTED else "active"
    return state


def run_retag(instance: dg.DagsterInstance) -> RunRetag:
    """Sets tags of the newest run with a run key in `instance` (none yet: nothing to tag)."""
    def retag(run_key: str, tags: dict[str, str]) -> None:
        found = instance.get_runs(filters=dg.RunsFilter(tags={RUN_KEY_TAG: run_key}), limit=1)
        if found:
            instance.add_run_tags(found[0].run_id, tags)
    return retag


def table_sensor(declaration: TableDeclaration, job: Any, poll_seconds: float = 1,
                 wait_seconds: float = 0) -> dg.SensorDefinition:
    """The table's raw-zone sensor; each tick lists every `poll_seconds` for up to `wait_seconds`
    (sensors/polling.py; the definitions pass the settings', a test's single look waits 0)."""
    prefixes = " and ".join(s.prefix for s in declaration.sources)

    @dg.sensor(
        name=f"raw_{declaration.name}_sensor",
        job=job,
        minimum_interval_seconds=max(1, int(poll_seconds)),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Lists new names under {prefixes} (S3 StartAfter the greatest time-ordered "
                    f"name; other names every look) plus one {SWEEP_PAGE}-key page of a sweep per look, every "
                    f"{poll_seconds:g} s; one run for everything new; a file its run left pending is requested "
                    f"again. A re-delivered old name is noticed within one sweep pass: ceil(objects / {SWEEP_PAGE}) "
                    "looks.",
    )
    def raw_table_sensor(context: dg.SensorEvaluationContext,
                         storage: StorageResource) -> dg.SensorResult | dg.SkipReason:
        runs, retag = None, None
        with contextlib.suppress(dg.DagsterInvariantViolationError):  # no instance: a unit test's context
            reap_dead_runs(context.instance)  # a killed run must not hold the table's run slot
            runs, retag = run_lookup(context.instance), run_retag(context.instance)
        attached = storage.attached()
        if attached is None:
            return dg.SkipReason("the embedded S3 server is not running (start it with `lake dev`)")
        return poll(lambda cursor: raw_zone_tick(declaration, attached, cursor, runs=runs, retag=retag),
                    context.cursor, poll_seconds, wait_seconds)

    return raw_table_sensor
