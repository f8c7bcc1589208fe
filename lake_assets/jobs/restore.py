"""The `restore_table` job: bring a table back to an earlier version or snapshot, as a new one.

Launched by `lake restore` (and `lake rollback`, its older name) like every other write:
through Dagster, under the table's write lock, so the UI shows the restore as a
materialization of the table with what it did. Only a table fed by raw objects goes back:
a table derived from one (its history, change feed, quarantine, tombstones, reports) follows
it (goes back with it, is rebuilt from it, or, the quarantine, keeps every refused line) and is
refused alone. `insurance` goes back with
delta-rs (and reverts its ledger files, their tombstones and their versions in
its history, core/apply/restore.py); Iceberg tables with pyiceberg (a rollback to an
ancestor snapshot, else set-current), and the raw objects the restored snapshot does not
contain are reverted in the ledger (the rule both formats share, core/restore_ledger.py),
web_sales' tombstones following the restored snapshot's runs as insurance's do (back or
forward): `lake run --reapply` loads them again.
"""

import datetime as dt

import dagster as dg

from lake_assets.core import restore_ledger
from lake_assets.core.errors import UsageError
from lake_assets.core.formats import delta, iceberg, iceberg_maintenance
from lake_assets.core.ledger import Ledger
from lake_assets.core.lock import LockOwner, table_lock
from lake_assets.core.tables import LEDGER, TPCDS_WEB_SALES, LakeTable, TableFormat, table
from lake_assets.core.apply.restore import RestoreReport, restore_as_before, restore_declared
from lake_assets.core.apply.restore_iceberg import restore_declared_iceberg
from lake_assets.core.registry import declaration, declared_by
from lake_assets.declared.keys import asset_key
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.runs import record_process
from lake_assets.tpcds.schema import ALL_TOMBSTONES

#: Bookkeeping that never goes back (a derived table goes back with its table: `LakeTable.derived_from`).
NOT_RESTORABLE = {LEDGER.name: "it is the record of what was applied; restoring it would hide history"}


class RestoreConfig(dg.Config):
    table: str
    version: int | None = None  # a Delta version or an Iceberg snapshot id
    as_of: str | None = None  # an ISO timestamp: the version current then


def restorable(name: str) -> LakeTable:
    """The table `name`, if a restore may take it back: not the ledger, and not a table derived
    from others (a history, change feed, quarantine, tombstones or report), which goes back with
    them (or is rebuilt from them) and would be left out of step alone."""
    entry = table(name)
    if entry.name in NOT_RESTORABLE:
        raise UsageError(f"{entry.name} cannot be restored: {NOT_RESTORABLE[entry.name]}")
    if entry.derived_from:
        sources = entry.derived_from
        which = sources[0] if len(sources) == 1 else f"the one of {', '.join(sources)} to go back"
        raise UsageError(f"{entry.name} cannot be restored alone: it is derived from {', '.join(sources)} and goes "
                         f"back with it (or is rebuilt from it); restore {which} instead: "
                         f"`lake restore {sources[0]} --version N`")
    return entry


def target_version(storage: LakeStorage, entry: LakeTable, version: int | None, as_of: str | None) -> int:
    """The Delta version or Iceberg snapshot id to restore (checked to exist)."""
    if (version is None) == (as_of is None):
        raise UsageError("give exactly one of --version and --as-of")
    if entry.format is TableFormat.ICEBERG:
        handle = iceberg.open_table(storage, entry)
        if handle is None:
            raise UsageError(f"table {entry.name} does not exist yet; see `lake status`")
        if version is not None:
            if handle.snapshot_by_id(version) is None:
                known = ", ".join(str(s.snapshot_id) for s in handle.snapshots()[-5:])
                raise UsageError(f"{entry.name} has no snapshot {version} (latest: {known})")
            return version
        when = delta.parse_as_of(as_of)
        snapshot = handle.snapshot_as_of_timestamp(int(when.timestamp() * 1000))
        if snapshot is None:
            raise UsageError(f"{entry.name} has no snapshot at or before {when.isoformat()}")
        return snapshot.snapshot_id
    delta_table = delta.open_table(storage, entry)
    if delta_table is None:
        raise UsageError(f"table {entry.name} does not exist yet; see `lake status`")
    target = version if version is not None else delta.version_at(delta_table, delta.parse_as_of(as_of))
    if not 0 <= target <= delta_table.version():
        raise UsageError(f"{entry.name} has versions 0 to {delta_table.version()}, not {target}")
    if target == delta_table.version():
        raise UsageError(f"{entry.name} is at version {target} already: nothing to restore")
    return target


@dg.op(description="Restore a table to an earlier version (Delta) or snapshot (Iceberg), as a new commit.")
def restore_table(context: dg.OpExecutionContext, config: RestoreConfig, storage: StorageResource,
                  engine: SparkEngine) -> None:
    record_process(context.instance, context.run_id)  # so reap_dead_runs can fail the run if we are killed
    entry = restorable(config.table)
    with storage.running() as running, \
            table_lock(running, entry.write_lock, owner=LockOwner.current(context.run_id)) as lease:
        target = target_version(running, entry, config.version, config.as_of)
        lease.check()
        declared = declared_by(entry)
        if declared is None:  # the TPC-DS star's
            metadata = _rollback_iceberg(running, entry, target, context.run_id)
        elif entry.format is TableFormat.ICEBERG:
            metadata = restore_metadata(restore_declared_iceberg(running, declared, target, context.run_id),
                                        "snapshot")
        else:  # a declared Delta table: every other Delta table is derived from one, or the ledger
            report = restore_declared(running, declared, target, context.run_id)
            _catch_up_feed(running, engine, entry.name)  # the restore's changes reach the feed at once
            metadata = restore_metadata(report)
        for file in metadata["reverted_files"].value:
            context.log.warning(f"{file}: reverted (apply it again with `lake run --reapply`)")
    context.log.info(f"{entry.name}: restored {target}: {metadata['description'].value}")
    context.log_event(dg.AssetMaterialization(asset_key=asset_key(entry), metadata=metadata))


def _catch_up_feed(storage: LakeStorage, engine: SparkEngine, name: str) -> None:
    """Derive the restore commit's change feed now (on the engine), as a run would at its start."""
    from lake_assets.core.apply import feed
    from lake_assets.core.tables import table_set
    declared = declaration(name)
    tables = table_set(declared)
    feed.catch_up(engine.session(storage), storage, tables.table, tables.changes, list(declared.keys))



def restore_metadata(report: RestoreReport, word: str = "version") -> dict:
    """The restore's materialization metadata (`word`: how the table numbers its versions; an
    Iceberg table's snapshot is current again, not restored as a new one)."""
    key = "snapshot_id" if word == "snapshot" else "delta_version"
    done = f"made snapshot {report.restored_version} current" if word == "snapshot" else \
        f"restored version {report.restored_version} as version {report.version_after}"
    return {
        "operation": "restore",
        "description": dg.MetadataValue.text(
            f"{done} (was {report.version_before}); rows {report.rows_before} -> {report.rows_after}"),
        f"restored_from_{word}": report.restored_version,
        f"{key}_before": report.version_before,
        key: report.version_after,
        "rows_before": report.rows_before,
        "rows_after": report.rows_after,
        "dagster/row_count": report.rows_after,
        "reverted_files": dg.MetadataValue.json(report.reverted),
        "reinstated_files": dg.MetadataValue.json(report.reinstated),
        "restated_files": dg.MetadataValue.json(report.restated),
        "tombstones_before": report.tombstones_before,
        "tombstones_after": report.tombstones_after,
        "history_rows_before": report.history_before,
        "history_rows_after": report.history_after,
    }


def _rollback_iceberg(storage: LakeStorage, entry: LakeTable, snapshot: int, run_id: str) -> dict:
    """Make `snapshot` current, then keep the ledger true (core/restore_ledger.py): objects whose
    snapshot is not in `snapshot`'s ancestry are reverted, reverted ones in it reinstated;
    web_sales' tombstones go to their version as the newest run `snapshot` contains left them
    (core/restore_ledger.py; ledger last, as for Delta)."""
    started = dt.datetime.now(dt.timezone.utc)
    handle = iceberg.open_table(storage, entry)
    before, rows_before = iceberg.current_snapshot_id(handle), iceberg.row_count(handle)
    iceberg_maintenance.rollback(handle, snapshot)
    after = iceberg.open_table(storage, entry)
    ancestry = iceberg.ancestry(after, snapshot)
    ledger = Ledger(storage)
    history = ledger.entries(entry.name)

    def contains(e: dict) -> bool:
        return e["table_version"] is None or e["table_version"] in ancestry
    changes = restore_ledger.ledger_changes(history, contains)
    if entry.name == TPCDS_WEB_SALES.name and changes:
        # a reverted delete must not supersede older changes of its key; a reinstated one must again
        until = restore_ledger.derived_until(history, contains)
        for tombstones in ALL_TOMBSTONES:
            restore_as_before(storage, until, tombstones)
    restore_ledger.record_restore(ledger, changes, f"restore to snapshot {snapshot}", run_id, started)
    return {
        "operation": "restore",
        "description": dg.MetadataValue.text(f"current snapshot {before} -> {snapshot}; rows {rows_before} -> "
                                             f"{iceberg.row_count(after)}"),
        "restored_from_snapshot": dg.MetadataValue.text(str(snapshot)),
        "snapshot_before": dg.MetadataValue.text(str(before)),
        "rows_before": rows_before,
        "rows_after": iceberg.row_count(after),
        "dagster/row_count": iceberg.row_count(after),
        "reverted_files": dg.MetadataValue.json([e["source_file"] for e in changes.reverted]),
        "reinstated_files": dg.MetadataValue.json([e["source_file"] for e in changes.reinstated]),
        "restated_files": dg.MetadataValue.json([e["source_file"] for e in changes.restated]),
    }


@dg.job(executor_def=dg.in_process_executor,
        description="Restore one table (config: table, version or as_of) as a new commit, under its write lock.")
def restore_table_job() -> None:
    restore_table()
