"""`lake rollback`: the older name of `lake restore TABLE --version ID` (kept for scripts)."""

from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.restore import restore_now


@app.command()
@friendly
def rollback(
    name: Annotated[str, typer.Argument(metavar="TABLE", help="table name, e.g. tpcds.web_sales or insurance")],
    snapshot: Annotated[int, typer.Option("--snapshot", help="Iceberg snapshot id or Delta version (see lake history)")],
) -> None:
    """Same as `lake restore TABLE --version SNAPSHOT` (its older name)."""
    restore_now(name, snapshot, None, "lake rollback")
