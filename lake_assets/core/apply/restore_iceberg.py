"""Restore a declared Iceberg table to an earlier snapshot, and keep the ledger true.

The table goes back by making the snapshot current (pyiceberg: a rollback to an ancestor, or
setting a later snapshot current again; no data is written, and the snapshot log keeps the
mistake). A snapshot contains the objects the ledger applied at it or at one of its ancestors
(its parent chain); an object whose run committed nothing belongs to the snapshot current when
that run started (from the snapshot log, which records rollbacks too). From there, the rule
both formats share (core/restore_ledger.py) reverts, reinstates and restates ledger entries,
and the tombstones and the history (Delta tables beside it) go to their versions as the newest
run the snapshot contains left them (core/apply/restore.py's `restore_as_before`). Ledger last:
a rerun makes the same snapshot current (nothing to do) and finishes the rest.
"""

import datetime as dt
from collections.abc import Callable

import pyarrow as pa

from lake_assets.core import restore_ledger
from lake_assets.core.apply.restore import RestoreReport, restore_as_before
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.errors import UsageError
from lake_assets.core.formats import iceberg, iceberg_maintenance
from lake_assets.core.ledger import Ledger
from lake_assets.core.tables import table_set
from lake_assets.resources.storage import LakeStorage


def restore_declared_iceberg(storage: LakeStorage, declaration: TableDeclaration, snapshot: int,
                             run_id: str) -> RestoreReport:
    """Make `snapshot` the table's current snapshot, then revert (or reinstate) ledger files,
    tombstones and history."""
    started = dt.datetime.now(dt.timezone.utc)
    tables = table_set(declaration)
    handle = iceberg.open_table(storage, tables.table)
    current = handle.current_snapshot() if handle is not None else None
    if handle is None or current is None:
        raise UsageError(f"table {tables.table.name} does not exist yet; see `lake status`")
    before, rows_before = current.snapshot_id, iceberg.row_count(handle)
    log = [(entry.timestamp_ms, entry.snapshot_id) for entry in handle.history()]  # before the restore's own
    iceberg_maintenance.rollback(handle, snapshot)
    after = iceberg.open_table(storage, tables.table)
    assert after is not None  # it existed a moment ago; the write lease keeps it
    report = RestoreReport(tables.table.name, snapshot, before, snapshot, rows_before, iceberg.row_count(after))
    ledger = Ledger(storage)
    history = ledger.entries(declaration.table_name)
    contains, ran = snapshot_rules(iceberg.ancestry(after, snapshot), log, history)
    changes = restore_ledger.ledger_changes(history, contains)
    until = restore_ledger.derived_until(history, ran) if changes else None
    report.tombstones_before, report.tombstones_after = restore_as_before(storage, until, tables.tombstones)
    report.history_before, report.history_after = restore_as_before(storage, until, tables.history)
    restore_ledger.record_restore(ledger, changes, f"restore to snapshot {snapshot}", run_id, started)
    report.reverted = [e["source_file"] for e in changes.reverted]
    report.reinstated = [e["source_file"] for e in changes.reinstated]
    report.restated = [e["source_file"] for e in changes.restated]
    return report


def snapshot_rules(lineage: set[int], log: list[tuple[int, int]],
                   history: pa.Table) -> tuple[Callable[[dict], bool], Callable[[dict], bool]]:
    """For an applied ledger entry: whether the restored snapshot (its `lineage`: it and its
    ancestors) contains its changes, and whether its own run is in the lineage (as
    core/apply/restore.py's `version_rules`, with snapshots for versions; `log`: the snapshot
    log, (milliseconds, snapshot id) in order)."""
    first_run = restore_ledger.first_runs_without_commit(history)

    def started_from(started: dt.datetime) -> int | None:
        """The snapshot current when a run started (None: before the table's first)."""
        moment = started.timestamp() * 1000
        current = [snapshot for at, snapshot in log if at <= moment]
        return current[-1] if current else None

    def in_lineage(snapshot: int | None) -> bool:
        return snapshot is None or snapshot in lineage

    def contains(entry: dict) -> bool:
        version = entry["table_version"]
        return in_lineage(started_from(first_run[(entry["source_file"], entry["source_etag"])]) if version is None
                          else version)

    def ran(entry: dict) -> bool:
        version = entry["table_version"]
        return in_lineage(started_from(entry["recorded_at"]) if version is None else version)
    return contains, ran

