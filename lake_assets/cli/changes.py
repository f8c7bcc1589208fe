"""`lake changes`: a table's change feed between two versions (read-only, no engine):
`insurance` from its stored feed (delta-rs), the TPC-DS star's Iceberg tables derived from
their snapshots (pyiceberg, core/formats/iceberg_changes.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import Format, render
from lake_assets.cli.session import lake_session
from lake_assets.core.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

    from lake_assets.core.tables import LakeTable
    from lake_assets.resources.storage import LakeStorage

FEED_NAMES = ["_commit_version", "_commit_timestamp", "_change_type"]


@app.command()
@friendly
def changes(
    name: Annotated[str, typer.Argument(
        metavar="TABLE", help="a declared table (insurance or one of yours), or a TPC-DS table (tpcds.web_sales, ...)")],
    from_version: Annotated[int, typer.Option("--from-version",
                                              help="first table version or Iceberg snapshot id (see lake history)")],
    to_version: Annotated[int | None, typer.Option("--to-version", help="last table version (default: newest)")]
    = None,
    fmt: Annotated[Format, typer.Option("--format")] = Format.table,
    all_columns: Annotated[bool, typer.Option("--all-columns", help="also the audit columns (_sequence, ...)")]
    = False,
) -> None:
    """The rows each version inserted, updated (pre- and post-image) or deleted, oldest first."""
    with lake_session() as lake:
        rows = read_feed(lake.storage, name, from_version, to_version)
    columns = [c for c in rows.column_names if c in FEED_NAMES or all_columns or not c.startswith("_")]
    rows = rows.select(columns)
    render(columns, [tuple(r.values()) for r in rows.to_pylist()], fmt, title=f"{name} changes")


def read_feed(storage: LakeStorage, name: str, from_version: int, to_version: int | None) -> pa.Table:
    """The change feed of table `name` between two versions, every column, oldest first:
    `_commit_version, _commit_timestamp, _change_type`, then the table's columns (the rows
    `lake changes` shows and SQL's `table_changes(name, from, to)` reads)."""
    from lake_assets.core.history import feed_of, feeds
    from lake_assets.core.tables import TPCDS_REPORTS, TableFormat, TableNotBuilt, table

    entry = table(name)
    if entry.format is TableFormat.ICEBERG and entry not in TPCDS_REPORTS:
        return _iceberg_feed(storage, entry, from_version, to_version)
    feed = feed_of(entry)
    if feed is None:
        raise UsageError(f"{name} has no change feed; tables with one: {', '.join(sorted(feeds()))} and the "
                         "TPC-DS star's tables (tpcds.web_sales, tpcds.item, ...)")
    if from_version < 0 or (to_version is not None and to_version < from_version):
        raise UsageError("versions run from 0, and --to-version may not be before --from-version")
    from lake_assets.core.change_feed import FEED_COLUMNS, read
    from lake_assets.core.formats.delta import current_version

    newest = current_version(storage, entry)
    if newest is None:
        raise TableNotBuilt(name)
    if from_version > newest:
        raise UsageError(f"{name} has versions 0 to {newest}, not {from_version}")
    rows = read(storage, entry, feed.table, feed.key, from_version, to_version)
    data = [c for c in rows.column_names if c not in FEED_COLUMNS.names]
    return rows.select([*FEED_NAMES, *data])


def _iceberg_feed(storage: LakeStorage, entry: LakeTable, start: int, end: int | None) -> pa.Table:
    """Derived from the snapshots between `start` and `end` (snapshot ids of one lineage)."""
    from lake_assets.core.formats import iceberg, iceberg_changes
    from lake_assets.core.tables import TableNotBuilt
    from lake_assets.tpcds.schema import KEYS

    handle = iceberg.open_table(storage, entry)
    if handle is None or handle.current_snapshot() is None:
        raise TableNotBuilt(entry.name)
    keys = entry.keys or KEYS[entry.identifier[1]]  # a declared table's, or the TPC-DS star's
    return iceberg_changes.read(handle, list(keys), start, end)
