"""Nightly maintenance of every table (the job: jobs/maintenance.py)."""

import dagster as dg

from lake_assets.jobs.maintenance import maintenance_job


nightly_maintenance = dg.ScheduleDefinition(
    name="nightly_maintenance", job=maintenance_job, cron_schedule="0 3 * * *", execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
