"""A table's history as `lake history` shows it: one row per Delta version or Iceberg snapshot,
newest first, with row counts that are true for every version.

Delta: a commit's own metrics say what it did only for some writers (delta-rs MERGE, DELETE,
UPDATE; any blind append). The engine's replaceWhere/rewrite commits (Sail) carry only the
rows they wrote, carry-overs included, so for a table with a change feed the counts come
from the feed: per version, `insert`, `update_postimage` and `delete` rows (derived from
the log for versions the feed does not hold yet). The operation is the commit's, followed
by the lake's own name for it where the writer recorded one (`userMetadata`, e.g.
`WRITE: merge (narrow)`).

Iceberg: pyiceberg's snapshot summaries: records and data files the snapshot added and
deleted (a merge-on-read MERGE's position deletes count as deleted records), and the rows it
holds (its records less its position deletes). A copy-on-write commit counts every row of
the files it rewrote (20 corrected rows can add 1,521 records and delete 1,520), and an
overwrite may not say what it deleted. So each snapshot a run of the lake made also shows
`rows_applied` from the ledger (the raw rows it applied, as the run's line says).
"""

import datetime as dt
from dataclasses import dataclass

from lake_assets.core import change_feed
from lake_assets.core.errors import UsageError
from lake_assets.core.ledger import APPLIED, Ledger
from lake_assets.core.tables import TABLES, LakeTable, TableFormat, TableNotBuilt, table
from lake_assets.resources.storage import LakeStorage

DELTA_COLUMNS = ["version", "timestamp", "operation", "rows_inserted", "rows_updated", "rows_deleted",
                 "files_added", "files_removed"]
ICEBERG_COLUMNS = ["snapshot_id", "timestamp", "operation", "rows_applied", "added_records", "deleted_records", "total_records",
                   "added_files", "deleted_files"]


@dataclass(frozen=True)
class Feed:
    """Where a Delta table's change feed lives, and the table's key."""

    table: LakeTable
    key: str


def feed_of(entry: LakeTable) -> Feed | None:
    """Where a Delta table's change feed lives (core/change_feed.py), or None when it has none."""
    return Feed(TABLES[entry.feed], entry.keys[0]) if entry.feed else None


def feeds() -> dict[str, Feed]:
    """Every Delta table with a change feed (a declared table's, core/tables.py), by name."""
    return {name: feed for name, entry in TABLES.items() if (feed := feed_of(entry)) is not None}

#: Metric names of a commit's row counts: delta-rs (snake_case) and Delta Spark / Sail (camelCase).
_INSERTED = ("num_target_rows_inserted", "numTargetRowsInserted")
_UPDATED = ("num_target_rows_updated", "numTargetRowsUpdated", "num_updated_rows", "numUpdatedRows")
_DELETED = ("num_target_rows_deleted", "numTargetRowsDeleted", "num_deleted_rows", "numDeletedRows")
_APPENDED = ("num_added_rows", "numOutputRows")
_FILES_ADDED = ("num_added_files", "numAddedFiles", "numFilesAdded", "numRestoredFile")  # the last: delta-rs' RESTORE
_FILES_REMOVED = ("num_removed_files", "numRemovedFiles", "numFilesRemoved", "numRemovedFile")


def history(storage: LakeStorage, name: str) -> tuple[list[str], list[tuple]]:
    """(columns, rows) of the table's history, newest first; the first column is the version
    or snapshot id. UsageError if the table does not exist yet."""
    entry = table(name)
    if entry.format is TableFormat.ICEBERG:
        return ICEBERG_COLUMNS, _iceberg_history(storage, entry)
    return DELTA_COLUMNS, _delta_history(storage, entry)


def _missing(name: str) -> UsageError:
    return TableNotBuilt(name)


def _delta_history(storage: LakeStorage, entry: LakeTable) -> list[tuple]:
    from lake_assets.core.formats.delta import open_table

    delta = open_table(storage, entry)
    if delta is None:
        raise _missing(entry.name)
    feed = feed_of(entry)
    counts = change_feed.change_counts(storage, entry, feed.table, feed.key) if feed else None
    rows = []
    for commit in delta.history():
        metrics = commit.get("operationMetrics") or {}
        if counts is not None:
            changes = counts.get(commit["version"], {})
            inserted, updated, deleted = (changes.get(t.value, 0) for t in (
                change_feed.ChangeType.INSERT, change_feed.ChangeType.UPDATE_POSTIMAGE, change_feed.ChangeType.DELETE))
        else:
            inserted, updated, deleted = _commit_counts(commit, metrics)
        operation = commit.get("operation")
        if commit.get("userMetadata"):
            operation = f"{operation}: {commit['userMetadata']}"
        rows.append((commit["version"], _timestamp(commit.get("timestamp")), operation, inserted, updated, deleted,
                     _metric(metrics, _FILES_ADDED), _metric(metrics, _FILES_REMOVED)))
    return rows


def _commit_counts(commit: dict, metrics: dict) -> tuple[int | None, int | None, int | None]:
    """(inserted, updated, deleted) from a commit's own metrics where they say it: a MERGE,
    DELETE or UPDATE reports its rows; a blind append, a table's first write, or a write that
    removed no file inserted what it wrote. Anything else (an overwrite that replaced files,
    on a table without a feed) is unknown: None."""
    if any(name in metrics for name in (*_INSERTED, *_UPDATED, *_DELETED)):
        return (_metric(metrics, _INSERTED) or 0, _metric(metrics, _UPDATED) or 0, _metric(metrics, _DELETED) or 0)
    mode = (commit.get("operationParameters") or {}).get("mode")
    blind = commit.get("operation") in ("WRITE", "CREATE TABLE") and mode in ("Append", "ErrorIfExists")
    if blind or _metric(metrics, _FILES_REMOVED) == 0:  # nothing removed: every row written is new
        return _metric(metrics, _APPENDED), 0, 0
    return None, None, None


def _metric(metrics: dict, names: tuple[str, ...]) -> int | None:
    return next((int(metrics[n]) for n in names if metrics.get(n) is not None), None)


def _timestamp(millis: int | None) -> str | None:
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).isoformat() if millis else None


def _iceberg_history(storage: LakeStorage, entry: LakeTable) -> list[tuple]:
    from lake_assets.core.formats import iceberg  # pyiceberg: only for Iceberg tables

    current = iceberg.open_table(storage, entry)
    if current is None:
        raise _missing(entry.name)
    applied = _applied_per_version(storage, entry.name)
    return [tuple(applied.get(e["snapshot_id"]) if c == "rows_applied" else e[c] for c in ICEBERG_COLUMNS)
            for e in iceberg.history(current)]


def _applied_per_version(storage: LakeStorage, name: str) -> dict[int, int]:
    """Raw rows applied per table version (Iceberg snapshot id), from the ledger's latest
    entry of every object applied to `name`."""
    applied: dict[int, int] = {}
    for entry in Ledger(storage).latest(name).values():
        if entry["status"] == APPLIED and entry["table_version"] is not None:
            applied[entry["table_version"]] = applied.get(entry["table_version"], 0) + (entry["rows_applied"] or 0)
    return applied
