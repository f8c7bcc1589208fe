"""The Dagster code location: wires assets, checks, jobs, sensors, schedules and resources."""

import dagster as dg

from lake_assets.core.registry import declarations
from lake_assets.declared import declared
from lake_assets.declared.assets import LEDGER_ASSET
from lake_assets.jobs.maintenance import maintenance_job
from lake_assets.jobs.restore import restore_table_job
from lake_assets.jobs.tpcds import load_tpcds_job, refresh_tpcds_reports_job
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.rules import LakeRules
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.schedules.maintenance import nightly_maintenance
from lake_assets.schedules.tpcds import tpcds_nightly
from lake_assets.sensors.reports import reports_sensor
from lake_assets.sensors.tpcds import tpcds_sensor
from lake_assets.settings import LakeSettings
from lake_assets.tpcds.assets import TPCDS_ASSETS
from lake_assets.tpcds.checks import TPCDS_CHECKS
from lake_assets.tpcds.report_assets import REPORT_ASSETS, REPORT_CHECKS


def build_definitions(settings: LakeSettings) -> dg.Definitions:
    """Everything the lake runs, configured by `settings` (the resources and the sensors' pace)."""
    poll, wait = settings.sensor_interval_seconds, settings.sensor_wait_seconds
    tables = [declared(d, poll, wait) for d in declarations()]
    return dg.Definitions(
        assets=[*(a for t in tables for a in t.assets), LEDGER_ASSET, *TPCDS_ASSETS, *REPORT_ASSETS],
        asset_checks=[*(c for t in tables for c in t.checks), *TPCDS_CHECKS,
                      *(REPORT_CHECKS if settings.tpcds_report_checks else [])],
        jobs=[*(t.job for t in tables), maintenance_job, restore_table_job, load_tpcds_job, refresh_tpcds_reports_job],
        sensors=[*(s for t in tables for s in t.sensors), tpcds_sensor(poll, wait), reports_sensor(poll)],
        schedules=[nightly_maintenance, tpcds_nightly],
        resources={
            "storage": StorageResource.from_settings(settings),
            "engine": SparkEngine.from_settings(settings),
            "rules": LakeRules.from_settings(settings),
        },
        executor=dg.in_process_executor,
    )


defs = build_definitions(LakeSettings.from_env())
