"""The TPC-DS raw-zone sensor: new objects under raw/tpcds/ start ONE run per tick.

Objects are found as the insurance sensor finds its files (sensors/discovery.py `discover`:
S3 `StartAfter` the greatest time-ordered name per prefix, names that are not time-ordered
listed every tick and compared by ETag, plus one page per tick of a sweep on the S3
server's clock), so no name hides another and no clock or upload delay loses an object.
The prefixes: each dimension's folder (its snapshot name is not time-ordered: compared by
ETag every tick), the fact day folders below `ws_sold_date_sk=` (date keys sort by time; the
`__HIVE_DEFAULT_PARTITION__` object is compared by ETag) and the corrections (DMS-style
names; any other name is compared by ETag). A new name, or a new ETag of a name that is
not time-ordered, is seen within one tick; a re-delivered day or a day older than the
newest one, within one sweep pass.

If anything is new, the tick asks the ledger what is pending and requests one run for all of
it: new dimension snapshots, the range of new days (single-run backfill), corrections
(`jobs/tpcds.py`; objects `lake restore` reverted wait for `lake run --reapply`).
"""

import datetime as dt

import dagster as dg

from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.sensors.discovery import Cursor, Zone, discover, object_id
from lake_assets.sensors.polling import poll
from lake_assets.jobs.tpcds import load_tpcds_job, pending_run_request
from lake_assets.tpcds.raw_contract import DAY_FOLDER_COLUMN, EXTENSION
from lake_assets.tpcds.schema import DIMENSIONS, RAW

TPCDS_ZONE = Zone(
    prefixes=(*(f"{RAW.root}{name}/" for name in DIMENSIONS), f"{RAW.facts}{DAY_FOLDER_COLUMN}=", RAW.corrections),
    is_data=lambda key: key.endswith(EXTENSION),
)


def tpcds_tick(storage: LakeStorage, cursor_text: str | None,
               now: dt.datetime | None = None) -> dg.SensorResult | dg.SkipReason:
    """One evaluation of the sensor against `storage` (an attached, running store); `now`
    defaults to the S3 server's clock."""
    cursor = Cursor.load(cursor_text)
    listed, now = discover(storage.get_client(), storage.bucket, cursor, TPCDS_ZONE, now)
    new = {object_id(o) for o in listed} - set(cursor.requested)
    if not new:
        return dg.SensorResult(skip_reason="no new TPC-DS raw objects", cursor=cursor.dump())
    cursor.requested.update({seen: now.isoformat() for seen in new})
    request = pending_run_request(storage)
    if request is None:
        return dg.SensorResult(skip_reason="new objects, but nothing pending (already applied)",
                               cursor=cursor.dump())
    return dg.SensorResult(run_requests=[request], cursor=cursor.dump())


def tpcds_sensor(poll_seconds: float = 1, wait_seconds: float = 0) -> dg.SensorDefinition:
    """The TPC-DS raw-zone sensor; each tick lists every `poll_seconds` for up to `wait_seconds`
    (sensors/polling.py; the definitions pass the settings', a test's single look waits 0)."""

    @dg.sensor(
        name="raw_tpcds_sensor",
        job=load_tpcds_job,
        minimum_interval_seconds=max(1, int(poll_seconds)),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Lists {RAW.root} as the insurance sensor lists its zone (new names after the greatest "
                    "time-ordered one, other names by ETag every look, a sweep page per look), every "
                    f"{poll_seconds:g} s; one run for every new object (days as one partition range).",
    )
    def raw_tpcds_sensor(context: dg.SensorEvaluationContext,
                         storage: StorageResource) -> dg.SensorResult | dg.SkipReason:
        attached = storage.attached()
        if attached is None:
            return dg.SkipReason("the embedded S3 server is not running (start it with `lake dev`)")
        return poll(lambda cursor: tpcds_tick(attached, cursor), context.cursor, poll_seconds, wait_seconds)

    return raw_tpcds_sensor
