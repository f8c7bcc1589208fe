"""`lake changes`: a table's change feed between two versions (read-only; delta-rs, no engine)."""

import importlib
from typing import Annotated

import pyarrow as pa
import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import Format, render
from lake_assets.cli.session import lake_session
from lake_assets.core.errors import UsageError
from lake_assets.core.tables import INSURANCE, TableNotBuilt, table
from lake_assets.resources.storage import LakeStorage

#: Tables with a change feed, and the module reading it (imported when the command runs).
FEEDS = {INSURANCE.name: "lake_assets.insurance.changes"}


@app.command()
@friendly
def changes(
    name: Annotated[str, typer.Argument(metavar="TABLE", help="table name: insurance")],
    from_version: Annotated[int, typer.Option("--from-version", help="first table version (see lake history)")],
    to_version: Annotated[int | None, typer.Option("--to-version", help="last table version (default: newest)")]
    = None,
    fmt: Annotated[Format, typer.Option("--format")] = Format.table,
    all_columns: Annotated[bool, typer.Option("--all-columns", help="also the audit columns (_sequence, ...)")]
    = False,
) -> None:
    """The rows each version inserted, updated (pre- and post-image) or deleted, oldest first."""
    from lake_assets.insurance.contract import current

    with lake_session() as lake:
        rows = read_feed(lake.storage, name, from_version, to_version)
    feed = ["_commit_version", "_commit_timestamp", "_change_type"]
    columns = [c for c in rows.column_names if c in feed or all_columns or c in current().names]
    rows = rows.select(columns)
    render(columns, [tuple(r.values()) for r in rows.to_pylist()], fmt, title=f"{name} changes")


def read_feed(storage: LakeStorage, name: str, from_version: int, to_version: int | None) -> pa.Table:
    """The change feed of table `name` between two versions, every column, oldest first:
    `_commit_version, _commit_timestamp, _change_type`, then the table's columns (the rows
    `lake changes` shows and SQL's `table_changes(name, from, to)` reads)."""
    entry = table(name)
    if entry.name not in FEEDS:
        raise UsageError(f"{name} has no change feed; tables with one: {', '.join(sorted(FEEDS))}")
    if from_version < 0 or (to_version is not None and to_version < from_version):
        raise UsageError("versions run from 0, and --to-version may not be before --from-version")
    from lake_assets.core.change_feed import FEED_COLUMNS
    from lake_assets.core.formats.delta import current_version

    newest = current_version(storage, entry)
    if newest is None:
        raise TableNotBuilt(name)
    if from_version > newest:
        raise UsageError(f"{name} has versions 0 to {newest}, not {from_version}")
    rows = importlib.import_module(FEEDS[entry.name]).read_changes(storage, from_version, to_version)
    data = [c for c in rows.column_names if c not in FEED_COLUMNS.names]
    return rows.select(["_commit_version", "_commit_timestamp", "_change_type", *data])
