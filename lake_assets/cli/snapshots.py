"""`lake rollback`: make an earlier snapshot (Iceberg) or version (Delta) of a table current again."""

from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import console
from lake_assets.cli.session import lake_session
from lake_assets.core.errors import UsageError
from lake_assets.core.formats import delta, iceberg
from lake_assets.core.formats import iceberg_maintenance
from lake_assets.core.tables import TableFormat, table


@app.command()
@friendly
def rollback(
    name: Annotated[str, typer.Argument(metavar="TABLE", help="table name, e.g. tpcds.web_sales or insurance")],
    snapshot: Annotated[int, typer.Option("--snapshot", help="Iceberg snapshot id or Delta version (see lake history)")],
) -> None:
    """Make SNAPSHOT the table's current state, as a new commit (history keeps everything)."""
    entry = table(name)
    with lake_session() as lake:
        if entry.format is TableFormat.ICEBERG:
            handle = iceberg.open_table(lake.storage, entry)
            if handle is None:
                raise UsageError(f"table {name} does not exist yet; see `lake status`")
            before = iceberg.current_snapshot_id(handle)
            iceberg_maintenance.rollback(handle, snapshot)
            console.print(f"{name}: current snapshot {before} -> {snapshot}")
        else:
            handle = delta.open_table(lake.storage, entry)
            if handle is None:
                raise UsageError(f"table {name} does not exist yet; see `lake status`")
            if not 0 <= snapshot <= handle.version():
                raise UsageError(f"{name} has versions 0 to {handle.version()}, not {snapshot}")
            before = handle.version()
            handle.restore(snapshot)
            console.print(f"{name}: restored version {snapshot} as version {handle.version()} (was {before})")
