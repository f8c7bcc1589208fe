"""Nightly catch-up: whatever the sensor missed (it was off, S3 was down) is applied at 02:00 UTC."""

import dagster as dg

from lake_assets.resources.storage_resource import StorageResource
from lake_assets.jobs.tpcds import load_tpcds_job, pending_run_request


@dg.schedule(job=load_tpcds_job, cron_schedule="0 2 * * *", execution_timezone="UTC",
             default_status=dg.DefaultScheduleStatus.RUNNING,
             description="One run for everything pending in raw/tpcds/ (dimensions, days, corrections).")
def tpcds_nightly(context: dg.ScheduleEvaluationContext, storage: StorageResource) -> dg.RunRequest | dg.SkipReason:
    attached = storage.attached()
    if attached is None:
        return dg.SkipReason("the embedded S3 server is not running")
    request = pending_run_request(attached)
    return request if request is not None else dg.SkipReason("nothing pending in raw/tpcds/")
