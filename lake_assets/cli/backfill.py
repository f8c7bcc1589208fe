"""`lake backfill`: load partitions of a table again in ONE Dagster run: a range of the TPC-DS
star's sold days (cli/tpcds_runs.py), or a declared table's newest snapshots
(cli/declared_backfill.py); the work is imported when the command runs."""

from typing import Annotated

import typer

from lake_assets.cli.app import EXIT_FAILED, EXIT_OK, app, friendly
from lake_assets.cli.session import lake_session
from lake_assets.core.errors import UsageError


@app.command()
@friendly
def backfill(
    name: Annotated[str, typer.Argument(metavar="TABLE", help="tpcds.web_sales, or a declared table")],
    start: Annotated[str | None, typer.Option("--from", help="first day (YYYY-MM-DD) or partition value")] = None,
    end: Annotated[str | None, typer.Option("--to", help="last day or partition value (inclusive)")] = None,
    values: Annotated[list[str] | None, typer.Option(
        "--partition", help="a partition of a declared table to load again (its folder's value); repeatable")] = None,
) -> None:
    """Load partitions again in ONE run. tpcds.web_sales: each day from --from to --to is replaced by
    its raw object. A declared table: the newest snapshot of each partition asked for (every one by
    default; the newest full load for a table of whole-table snapshots), each as of its own stamp, so
    changes made since are kept and what the table lost comes back."""
    from lake_assets.cli.tpcds_runs import PARTITIONED

    if name in PARTITIONED:
        from lake_assets.cli.tpcds_runs import backfill_selection, report_tpcds_run, run_tpcds

        if start is None or end is None or values:
            raise UsageError(f"{name}: give the days to load again with --from and --to (YYYY-MM-DD)")
        keys, tags = backfill_selection(name, start, end)
        with lake_session() as lake:
            if not report_tpcds_run(run_tpcds(lake, keys, tags, "lake backfill")):
                raise typer.Exit(EXIT_FAILED)
        return
    from lake_assets.cli.declared_backfill import backfilled, reloaded, run_backfill

    declared = backfilled(name, ", ".join(PARTITIONED))
    with lake_session() as lake:
        code = run_backfill(lake, declared, reloaded(lake, declared, start, end, values or []))
    if code != EXIT_OK:
        raise typer.Exit(code)
