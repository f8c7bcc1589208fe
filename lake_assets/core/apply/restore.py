"""Restore a declared table to an earlier version, as a new version, and keep the ledger true.

The table goes back with delta-rs (`DeltaTable.restore`: one ordinary Delta commit, so
history keeps the mistake and everything derived from commits sees the restore). Then:

- the files whose changes the restored version does not contain are `reverted` in the
  ledger (and not applied again unless `lake run --reapply` asks), files reverted by an
  earlier restore that the restored version does contain are `applied` again, and files
  applied again since the application the restored version holds are back to that one;
- the tombstones table and `insurance_history` go to their versions as the newest run the
  restored version contains left them (core/restore_ledger.py): restoring back, the
  tombstones and history versions the reverted runs recorded are gone (a key they deleted
  no longer supersedes changes arriving for it later) and the older tombstones they had
  replaced are back; restoring forward, the reinstated runs' are back (a late change older
  than one of their deletes is superseded again). So the history is the one the restored
  version's runs wrote, whose current rows are that version's table: not the history of
  the same files as applied since (a reverted full load applied again in the run of a
  newer snapshot has all its rows superseded and records no version of its own, yet the
  version of its first application holds its rows).

Which files a version contains follows its lineage in the table's history: a RESTORE
commit contains what its target version contained; any other commit, what the version
before it contained plus the files the ledger applied at it. A file whose run committed
nothing (all its rows superseded) belongs to the version current when its run started
(a RESTORE commit too: the versions after it contain the file).
Which files are reverted or reinstated from there is the rule both formats share
(core/restore_ledger.py).

Order for a rerun after a failure: table commit, tombstones, history, ledger last (its entries
as of the restore's start). A rerun restores the same content again (one more RESTORE
commit), takes the tombstones and the history to the same versions and finishes the rest.
"""

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
from deltalake import DeltaTable

from lake_assets.core.errors import UsageError
from lake_assets.core import restore_ledger
from lake_assets.core.formats.delta import commit_times, open_table, row_count
from lake_assets.core.ledger import Ledger
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.tables import LakeTable, table_set
from lake_assets.resources.storage import LakeStorage

RESTORE_OPERATION = "RESTORE"


@dataclass
class RestoreReport:
    table: str
    restored_version: int
    version_before: int
    version_after: int
    rows_before: int
    rows_after: int
    reverted: list[str] = field(default_factory=list)  # files taken out of the table
    reinstated: list[str] = field(default_factory=list)  # files reverted earlier, back in the table
    restated: list[str] = field(default_factory=list)  # files applied again since, back to the application restored
    tombstones_before: int = 0
    tombstones_after: int = 0
    history_before: int = 0  # insurance_history's rows (versions and deletes)
    history_after: int = 0


def restore_delta(storage: LakeStorage, table: LakeTable, version: int) -> RestoreReport:
    """Make `version` the table's content again, as one new commit."""
    delta = open_table(storage, table)
    if delta is None:
        raise UsageError(f"table {table.name} does not exist yet; see `lake status`")
    if not 0 <= version <= delta.version():
        raise UsageError(f"{table.name} has versions 0 to {delta.version()}, not {version}")
    report = RestoreReport(table.name, version, delta.version(), delta.version(), row_count(delta), row_count(delta))
    delta.restore(version)
    after = open_table(storage, table)
    report.version_after, report.rows_after = after.version(), row_count(after)
    return report


def restore_declared(storage: LakeStorage, declaration: TableDeclaration, version: int, run_id: str) -> RestoreReport:
    """Restore the table to `version`, then revert (or reinstate) ledger files, tombstones and history."""
    started = dt.datetime.now(dt.timezone.utc)
    tables = table_set(declaration)
    report = restore_delta(storage, tables.table, version)
    ledger = Ledger(storage)
    history = ledger.entries(declaration.table_name)
    contains, ran = version_rules(open_table(storage, tables.table), history, version)
    changes = restore_ledger.ledger_changes(history, contains)
    until = restore_ledger.derived_until(history, ran) if changes else None
    report.tombstones_before, report.tombstones_after = restore_as_before(storage, until, tables.tombstones)
    report.history_before, report.history_after = restore_as_before(storage, until, tables.history)
    restore_ledger.record_restore(ledger, changes, f"restore to version {version} (as version {report.version_after})",
                                  run_id, started)
    report.reverted = [e["source_file"] for e in changes.reverted]
    report.reinstated = [e["source_file"] for e in changes.reinstated]
    report.restated = [e["source_file"] for e in changes.restated]
    return report


def version_rules(delta: DeltaTable, history: pa.Table,
                  version: int) -> tuple[Callable[[dict], bool], Callable[[dict], bool]]:
    """Over `version`'s lineage (see the module docstring), for an applied ledger entry:
    whether `version` contains its changes (the shared rule, core/restore_ledger.py; a run
    that committed nothing: the version the object's first run that committed nothing
    started from, not a restore that reinstated that run's entry), and whether
    its own run is in the lineage (committed nothing: the version that run started from;
    the tombstones follow those runs)."""
    times = commit_times(delta)
    operations = {h["version"]: h for h in delta.history()}
    # (found by test_restore_model: a reapplication was judged by its own start)
    first_run = restore_ledger.first_runs_without_commit(history)
    lineage = {-1}  # before version 0: files whose run committed nothing into no table
    at = version
    while at >= 0:
        commit = operations.get(at, {})
        lineage.add(at)  # a restore's own version: files whose run committed nothing after it started from it
        if commit.get("operation") == RESTORE_OPERATION:
            at = int(commit["operationParameters"]["version"])  # a restore contains what its target did
        else:
            at -= 1

    def started_from(started: dt.datetime) -> int:
        return max((v for v, t in times.items() if t <= started), default=-1)

    def contains(entry: dict) -> bool:
        version = entry["table_version"]
        return (started_from(first_run[(entry["source_file"], entry["source_etag"])]) if version is None
                else version) in lineage

    def ran(entry: dict) -> bool:
        version = entry["table_version"]
        return (started_from(entry["recorded_at"]) if version is None else version) in lineage
    return contains, ran


def restore_as_before(storage: LakeStorage, until: dt.datetime | None, table: LakeTable) -> tuple[int, int]:
    """Take a table derived from the runs (the tombstones, insurance_history) to its last
    version committed before `until` (the start of the first run or restore after the newest
    run the restored version contains: core/restore_ledger.py's `derived_until`; None
    leaves it as it is). Returns its row count before and after. (Also web_sales_tombstones'
    and tpcds_tombstones', for an Iceberg restore of web_sales: lake_assets/jobs/restore.py.)"""
    delta = open_table(storage, table)
    if delta is None:
        return 0, 0
    before = row_count(delta)
    if until is None:
        return before, before
    earlier = [v for v, at in commit_times(delta).items() if at < until]
    if not earlier:  # created by a later run: none of its rows stay
        delta.delete()
    elif max(earlier) != delta.version():
        delta.restore(max(earlier))
    return before, row_count(open_table(storage, table))
