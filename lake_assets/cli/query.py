"""`lake query` and `lake history`: read the lake's tables by name."""

from enum import StrEnum
from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.history import show_history
from lake_assets.cli.output import Format, render
from lake_assets.cli.session import LakeSession, importing, lake_session
from lake_assets.core.errors import UsageError


def show_query(lake: LakeSession, sql: str, fmt: Format, version: int | None = None, as_of: str | None = None) -> None:
    from pyspark.errors import PySparkException

    from lake_assets.cli import sql_errors
    from lake_assets.cli.sql_binding import Binder, TimeTravel
    from lake_assets.cli.sql_guard import tables_in

    names = tables_in(sql)
    if (version is not None or as_of) and len(names) != 1:
        raise UsageError("--version/--as-of need a query that reads exactly one table; it reads "
                         + (", ".join(names) or "none"))
    flags = TimeTravel(version, as_of) if version is not None or as_of else None
    binder = Binder(lake, lake.spark())
    bound = binder.bind(sql, flags)
    try:
        frame = binder.spark.sql(bound)
        rows = [tuple(row) for row in frame.collect()]
    except PySparkException as error:
        mapped = sql_errors.from_engine(error, list(binder.frames), binder.columns)
        if mapped is None:
            raise
        raise mapped from None
    render(frame.columns, rows, fmt)


class QueryEngine(StrEnum):
    spark = "spark"  # the configured Spark engine (Sail by default)
    duckdb = "duckdb"  # the BI read path: DuckDB over the same tables


def show_query_duckdb(lake: LakeSession, sql: str, fmt: Format) -> None:
    from lake_assets.cli.sql_binding import time_travel_in
    from lake_assets.core import sql_nesting
    from lake_assets.resources import duckdb_sandbox

    sql_nesting.check_duckdb(sql)  # before sqlglot recurses into it looking for AS OF
    if needs_spark := time_travel_in(sql):
        raise UsageError(f"{needs_spark} needs --engine spark (the default) on lake query")
    columns, rows = duckdb_sandbox.query(lake.storage, sql)
    render(columns, rows, fmt)


@app.command()
@friendly
def query(
    sql: Annotated[str, typer.Argument(help="Spark SQL over the lake's tables by name")],
    fmt: Annotated[Format, typer.Option("--format")] = Format.table,
    version: Annotated[int | None, typer.Option("--version", help="read the table as of this Delta version or Iceberg snapshot id")] = None,
    as_of: Annotated[str | None, typer.Option("--as-of", help="read the table as of this timestamp")] = None,
    engine: Annotated[QueryEngine, typer.Option("--engine", help="spark (default) or duckdb (BI read path)")]
    = QueryEngine.spark,
) -> None:
    """Run a read-only SQL query over the lake's tables by name (see SHOW TABLES).

    SELECT / WITH / set operations / VALUES over registered tables, with `t VERSION AS OF n`,
    `t TIMESTAMP AS OF 'ts'` and `table_changes('t', from[, to])`; and SHOW TABLES,
    DESCRIBE [EXTENDED] t, DESCRIBE HISTORY t. No writes, no path-based tables, no
    file-reading functions.
    """
    from lake_assets.cli.sql_statements import answer, lake_statement

    statement = lake_statement(sql)
    readers = ("lake_assets.cli.sql_statements",) if statement is not None else (
        ("lake_assets.resources.duckdb_sandbox",) if engine is QueryEngine.duckdb else ("lake_assets.resources.spark",))
    with lake_session(while_starting=importing(*readers)) as lake:
        if statement is not None:  # SHOW / DESCRIBE: answered from the tables' metadata, on any engine
            if version is not None or as_of:
                raise UsageError("--version/--as-of time-travel a query; DESCRIBE HISTORY lists the versions")
            answer(lake, statement, fmt)
        elif engine is QueryEngine.duckdb:
            if version is not None or as_of:
                raise UsageError("--version/--as-of need --engine spark")
            show_query_duckdb(lake, sql, fmt)
        else:
            show_query(lake, sql, fmt, version, as_of)


@app.command()
@friendly
def history(
    name: Annotated[str, typer.Argument(
        metavar="TABLE", help="a declared table (insurance or one of yours), or a TPC-DS table (tpcds.web_sales, ...)")],
    fmt: Annotated[Format, typer.Option("--format")] = Format.table,
) -> None:
    """A table's history, newest first: Delta versions or Iceberg snapshots (first column the id)."""
    with lake_session(while_starting=importing("lake_assets.core.history")) as lake:
        show_history(lake, name, fmt)
