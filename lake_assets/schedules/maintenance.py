"""Nightly Delta maintenance with delta-rs: compact small files, then vacuum old ones.

Vacuum keeps a week of history (Delta's default safe retention), so time travel and
readers that started before it keep working.
"""

import dagster as dg

from lake_assets.core.formats.delta import open_table
from lake_assets.jobs import TABLE_TAG
from lake_assets.resources.storage import LakeStorage
from lake_assets.runs import record_process
from lake_assets.core.lock import DEFAULT_WAIT_SECONDS, LockOwner, table_lock
from lake_assets.core.tables import INSURANCE, INSURANCE_QUARANTINE, INSURANCE_TOMBSTONES, TABLES, LakeTable, TableFormat

VACUUM_RETENTION_HOURS = 168
#: The write lock each table is maintained under: the lock of the run that writes it.
#: Tables not listed have their own (the ledger is appended to by delta-rs, whose
#: optimistic commits retry on conflict).
WRITE_LOCK = {table.name: INSURANCE.name for table in (INSURANCE, INSURANCE_QUARANTINE, INSURANCE_TOMBSTONES)}


class MaintenanceConfig(dg.Config):
    retention_hours: int = VACUUM_RETENTION_HOURS
    lock_wait_seconds: float = DEFAULT_WAIT_SECONDS  # how long to wait for a run writing the table


@dg.op(description="optimize.compact() and vacuum() every curated Delta table.")
def compact_and_vacuum(context: dg.OpExecutionContext, config: MaintenanceConfig, storage: LakeStorage) -> None:
    record_process(context.instance, context.run_id)  # so reap_dead_runs can fail the run if we are killed
    with storage.running() as running:
        _maintain(context, config, running)


def _maintain(context: dg.OpExecutionContext, config: MaintenanceConfig, storage: LakeStorage) -> None:
    owner = LockOwner.current(context.run_id)
    for table in (t for t in TABLES.values() if t.format is TableFormat.DELTA):
        with table_lock(storage, WRITE_LOCK.get(table.name, table.name), owner=owner,
                        wait_seconds=config.lock_wait_seconds):
            _maintain_table(context, config, storage, table)


def _maintain_table(context: dg.OpExecutionContext, config: MaintenanceConfig, storage: LakeStorage,
                    table: LakeTable) -> None:
    """Compact and vacuum one table while its writers are locked out."""
    delta = open_table(storage, table)
    if delta is None:
        return
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
