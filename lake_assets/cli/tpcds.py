"""`lake tpcds ...`: land TPC-DS data and corrections in the raw zone."""

from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import console
from lake_assets.cli.session import lake_session
from lake_assets.tpcds import raw_contract

tpcds_app = typer.Typer(help="The TPC-DS web_sales star schema: generate raw data, land corrections.",
                        no_args_is_help=True)
app.add_typer(tpcds_app, name="tpcds")


@tpcds_app.command()
@friendly
def generate(
    scale: Annotated[float, typer.Option(help="TPC-DS scale factor, 0.01 to 10 (1 = 719,384 web_sales rows)")] = 0.1,
    clean: Annotated[bool, typer.Option(help="first delete raw/tpcds/ (objects of an earlier scale)")] = False,
) -> None:
    """Run DuckDB's dsdgen and land date_dim, time_dim, customer, item and web_sales (one object per sold date)."""
    from lake_assets.cli.progress import step_progress
    from lake_assets.tpcds.generate import generate as run_generate

    with lake_session() as lake:
        with step_progress() as progress:
            if clean:
                progress.step(f"deleting {raw_contract.RAW_PREFIX}")
                lake.storage.delete_prefix(raw_contract.RAW_PREFIX)
            result = run_generate(lake.storage, scale, progress=progress)
        rows = ", ".join(f"{table} {count:,}" for table, count in result.rows.items())
        console.print(f"TPC-DS SF{scale:g}: {rows}; {result.sold_dates} sold dates, "
                      f"{result.null_date_rows} rows without a sold date")
        console.print(f"landed {result.objects} objects ({result.bytes / 1e6:.1f} MB) under "
                      f"{lake.storage.uri(raw_contract.RAW_PREFIX)} in "
                      + ", ".join(f"{step} {seconds:.1f} s" for step, seconds in result.seconds.items()))


@tpcds_app.command()
@friendly
def corrections(
    count: Annotated[int, typer.Argument(help="number of changed web_sales lines")],
    seed: Annotated[int, typer.Option(help="seed of the deterministic pick")] = 0,
) -> None:
    """Land a batch of COUNT late corrections (changed quantities and prices, cancelled orders, late lines)."""
    from lake_assets.tpcds.correction_batch import land_corrections

    with lake_session() as lake:
        result = land_corrections(lake.storage, count, seed)
        console.print(f"landed {lake.storage.uri(result.key)}: {result.updates} updates, "
                      f"{result.deletes} deletes (cancelled orders), {result.inserts} inserts (late lines)")
