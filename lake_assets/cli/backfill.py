"""`lake backfill`: load a range of a partitioned table's partitions in ONE Dagster run
(the work is in cli/tpcds_runs.py, imported when the command runs)."""

from typing import Annotated

import typer

from lake_assets.cli.app import EXIT_FAILED, app, friendly
from lake_assets.cli.session import lake_session


@app.command()
@friendly
def backfill(
    name: Annotated[str, typer.Argument(metavar="TABLE", help="a partitioned table: tpcds.web_sales")],
    start: Annotated[str, typer.Option("--from", help="first day, YYYY-MM-DD")],
    end: Annotated[str, typer.Option("--to", help="last day, YYYY-MM-DD (inclusive)")],
) -> None:
    """Re-load a range of days in ONE run: each day's partition is replaced by its raw object."""
    from lake_assets.cli.tpcds_runs import backfill_selection, report_tpcds_run, run_tpcds

    keys, tags = backfill_selection(name, start, end)
    with lake_session() as lake:
        if not report_tpcds_run(run_tpcds(lake, keys, tags, "lake backfill")):
            raise typer.Exit(EXIT_FAILED)
