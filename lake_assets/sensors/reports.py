"""The report tables follow the star: Dagster's automation-condition sensor, run with `lake dev`."""

import dagster as dg

from lake_assets.jobs.tpcds import TPCDS_TAGS
from lake_assets.settings import DAGSTER_SENSOR_LOOP_SECONDS
from lake_assets.tpcds.report_assets import REPORTS_GROUP


def reports_sensor(interval_seconds: float) -> dg.AutomationConditionSensorDefinition:
    """Dagster's automation sensors are stopped by default; this one runs with `lake dev`. Its runs
    carry the TPC-DS concurrency tag, so a refresh queues behind a load of the star it reads."""
    return dg.AutomationConditionSensorDefinition(
        "tpcds_reports_after_star", target=dg.AssetSelection.groups(REPORTS_GROUP), run_tags=TPCDS_TAGS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=int(max(interval_seconds, DAGSTER_SENSOR_LOOP_SECONDS)),
        description="Refreshes the report tables after the star tables they read changed.",
    )
