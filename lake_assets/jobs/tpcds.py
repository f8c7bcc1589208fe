"""The TPC-DS jobs (the star's load and the reports' refresh) and the one run request every
trigger (sensor, schedule, `lake run`) makes for the star."""

import datetime as dt
import hashlib

import dagster as dg

from lake_assets.runs import TABLE_TAG
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.assets import (
    CORRECTIONS_KEY,
    DAILY,
    GROUP,
    QUARANTINE_KEY,
    WEB_SALES_KEY,
    asset_key,
)
from lake_assets.tpcds.pending import PendingWork, pending_work
from lake_assets.tpcds.report_assets import REPORTS_GROUP

#: The tags that make one run cover a partition range (Dagster's single-run backfill, as its
#: docs name them), written out rather than imported from a private Dagster module; the run
#: creation test (cli/test_run_creation.py) fails if Dagster stops reading them.
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"

#: One concurrency tag per domain: runs writing TPC-DS tables queue behind each other.
TPCDS_TAGS = {TABLE_TAG: GROUP}

load_tpcds_job = dg.define_asset_job(
    "load_tpcds",
    selection=dg.AssetSelection.groups(GROUP),
    description="Load the TPC-DS star from the raw zone: dimension snapshots, a range of sold days (one run), "
                "corrections; then the checks.",
    tags=TPCDS_TAGS,
    executor_def=dg.in_process_executor,
)


def range_tags(first: str, last: str) -> dict[str, str]:
    """Tags that make one run cover the partition range first..last (single-run backfill)."""
    return {ASSET_PARTITION_RANGE_START_TAG: first, ASSET_PARTITION_RANGE_END_TAG: last}


def selection_for(work: PendingWork, storage: LakeStorage) -> tuple[list[dg.AssetKey], dict[str, str]]:
    """The assets a run must materialize for `work`, and the partition-range tags it needs."""
    keys = [asset_key(name) for name in work.dimensions]
    tags: dict[str, str] = {}
    day_range = work.day_range(storage)
    if day_range is not None:
        keys.append(WEB_SALES_KEY)
        tags = range_tags(*(DAILY.get_partition_key_for_timestamp(_midnight(d)) for d in day_range))
    if work.corrections:
        keys.append(CORRECTIONS_KEY)
    if keys:
        keys.append(QUARANTINE_KEY)
    return keys, tags


def load_config(keys: list[dg.AssetKey], reapply: bool = False, pending_only: bool = False) -> dict:
    """Run config of a `load_tpcds` run over `keys` (assets/TpcdsLoadConfig): `pending_only` for
    a run of what is pending (web_sales loads only the new days of its range), `reapply` for
    one that takes in the objects `lake restore` reverted too."""
    if not (reapply or pending_only):
        return {}
    config = {"config": {"reapply": reapply, "pending_only": pending_only}}
    return {"ops": {key.to_python_identifier(): config for key in keys if key != QUARANTINE_KEY}}


def pending_run_request(storage: LakeStorage) -> dg.RunRequest | None:
    """ONE run for everything pending in the TPC-DS raw zone, or None."""
    work = pending_work(storage)
    if work.empty:
        return None
    keys, tags = selection_for(work, storage)
    if not keys:
        return None
    fingerprint = hashlib.sha256(repr(work).encode()).hexdigest()[:16]
    return dg.RunRequest(run_key=f"tpcds-{fingerprint}", asset_selection=keys, tags={**TPCDS_TAGS, **tags},
                         run_config=load_config(keys, pending_only=True))


def _midnight(day: dt.date) -> float:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp()


refresh_tpcds_reports_job = dg.define_asset_job(
    "refresh_tpcds_reports", selection=dg.AssetSelection.groups(REPORTS_GROUP),
    description="Recompute every TPC-DS report table from the star.", tags=TPCDS_TAGS,
    executor_def=dg.in_process_executor,
)
