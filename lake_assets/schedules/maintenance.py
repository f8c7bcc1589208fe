"""Nightly Delta maintenance with delta-rs: compact small files, then vacuum old ones.

Vacuum keeps a week of history (Delta's default safe retention), so time travel and
readers that started before it keep working.
"""

import dagster as dg

from lake_assets.core.formats.delta import open_table
from lake_assets.jobs import TABLE_TAG
from lake_assets.resources.storage import LakeStorage
from lake_assets.core.tables import TABLES, TableFormat

VACUUM_RETENTION_HOURS = 168


class MaintenanceConfig(dg.Config):
    retention_hours: int = VACUUM_RETENTION_HOURS


@dg.op(description="optimize.compact() and vacuum() every curated Delta table.")
def compact_and_vacuum(context: dg.OpExecutionContext, config: MaintenanceConfig, storage: LakeStorage) -> None:
    with storage.running() as running:
        _maintain(context, config, running)


def _maintain(context: dg.OpExecutionContext, config: MaintenanceConfig, storage: LakeStorage) -> None:
    for table in (t for t in TABLES.values() if t.format is TableFormat.DELTA):
        delta = open_table(storage, table)
        if delta is None:
            continue
        compacted = delta.optimize.compact()
        removed = delta.vacuum(retention_hours=config.retention_hours, dry_run=False,
                               enforce_retention_duration=config.retention_hours >= VACUUM_RETENTION_HOURS)
        context.log.info(f"{table.name}: compacted {compacted['numFilesRemoved']} files into "
                         f"{compacted['numFilesAdded']}, vacuumed {len(removed)}")
        context.add_output_metadata({table.name: {"files_compacted": compacted["numFilesRemoved"],
                                                  "files_vacuumed": len(removed)}})


@dg.job(tags={TABLE_TAG: "insurance"}, executor_def=dg.in_process_executor,
        description="Compact and vacuum the curated Delta tables.")
def delta_maintenance_job() -> None:
    compact_and_vacuum()


nightly_maintenance = dg.ScheduleDefinition(
    name="nightly_maintenance", job=delta_maintenance_job, cron_schedule="0 3 * * *", execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
