"""Iceberg table facts through pyiceberg and the REST catalog: existence, snapshots, row counts.

The Iceberg counterpart of formats/delta.py. pyiceberg reads the catalog independently of
the engine that wrote the table, so these facts double as a second reader's view.
pyiceberg is imported on first use, not with this module: the code location imports it for the
TPC-DS assets, and every run of it (a new process) would pay ~0.3 s for it.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from lake_assets.core.tables import LakeTable
from lake_assets.resources.storage import LakeStorage

if TYPE_CHECKING:
    from pyiceberg.table import Table


def open_table(storage: LakeStorage, table: LakeTable) -> Table | None:
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        return storage.catalog().pyiceberg().load_table(table.identifier)
    except (NoSuchTableError, NoSuchNamespaceError):
        return None


def exists(storage: LakeStorage, table: LakeTable) -> bool:
    return open_table(storage, table) is not None


def current_snapshot_id(iceberg: Table) -> int | None:
    snapshot = iceberg.current_snapshot()
    return snapshot.snapshot_id if snapshot else None


def ancestry(iceberg: Table, snapshot_id: int | None) -> set[int]:
    """`snapshot_id` and every snapshot it descends from (its parent chain): what it contains."""
    found: set[int] = set()
    snapshot = iceberg.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    while snapshot is not None and snapshot.snapshot_id not in found:
        found.add(snapshot.snapshot_id)
        parent = snapshot.parent_snapshot_id
        snapshot = iceberg.snapshot_by_id(parent) if parent is not None else None
    return found


def row_count(iceberg: Table) -> int:
    """Rows in the current snapshot, from its summary (no data file is read)."""
    snapshot = iceberg.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return 0
    return _live_rows(snapshot.summary.additional_properties) or 0


def live_rows(snapshot) -> int:
    """Rows a snapshot holds, from its summary (0 without one)."""
    summary = snapshot.summary
    return (_live_rows(summary.additional_properties) or 0) if summary is not None else 0


def _live_rows(summary: dict[str, str]) -> int | None:
    """The rows a snapshot holds: its data files' records less its position deletes (each one row: a
    merge-on-read MERGE deletes a row once, and an overwrite drops the delete files with the rows)."""
    total = summary.get("total-records")
    return None if total is None else int(total) - int(summary.get("total-position-deletes", 0))


def history(iceberg: Table) -> list[dict]:
    """Snapshots of the table's log, newest first, with what each one did."""
    rows = []
    for entry in reversed(iceberg.history()):
        snapshot = iceberg.snapshot_by_id(entry.snapshot_id)
        summary = snapshot.summary if snapshot else None
        props = summary.additional_properties if summary else {}
        rows.append({
            "snapshot_id": entry.snapshot_id,
            "timestamp": dt.datetime.fromtimestamp(entry.timestamp_ms / 1000, dt.timezone.utc).isoformat(),
            "operation": str(summary.operation.value) if summary else None,
            "parent_id": snapshot.parent_snapshot_id if snapshot else None,
            "added_records": _int(props.get("added-records")),
            "deleted_records": _deleted_rows(props),
            "total_records": _live_rows(props),
            "added_files": _int(props.get("added-data-files")),
            "deleted_files": _int(props.get("deleted-data-files")),
        })
    return rows


def _deleted_rows(summary: dict[str, str]) -> int | None:
    """Rows a snapshot removed: in the data files it dropped, and by its position deletes."""
    dropped, deletes = summary.get("deleted-records"), summary.get("added-position-deletes")
    if dropped is None and deletes is None:
        return None
    return int(dropped or 0) + int(deletes or 0)


def _int(value: str | None) -> int | None:
    return int(value) if value is not None else None
