"""`lake query` and `lake history`: read the lake's tables by name."""

import datetime as dt
from enum import StrEnum
from typing import Annotated

import typer

from lake_assets.cli.app import app, friendly
from lake_assets.cli.output import Format, render
from lake_assets.cli.session import LakeSession, lake_session
from lake_assets.core.errors import UsageError
from lake_assets.core.tables import TableFormat, TableNotBuilt, table


def show_query(lake: LakeSession, sql: str, fmt: Format, version: int | None = None, as_of: str | None = None) -> None:
    from lake_assets.cli.sql_guard import bind_qualified_names, tables_in, view_name
    from lake_assets.core.formats.delta import ensure_readable, open_table, parse_as_of

    names = tables_in(sql)
    if (version is not None or as_of) and len(names) != 1:
        raise UsageError("--version/--as-of need a query that reads exactly one table; it reads "
                         + (", ".join(names) or "none"))
    spark = lake.spark()
    for name in names:
        entry = table(name)
        if entry.format is TableFormat.ICEBERG:
            from lake_assets.core.formats import iceberg  # pyiceberg: only for queries that read Iceberg

            # Iceberg tables resolve by name in the engine's default (REST) catalog.
            if iceberg.open_table(lake.storage, entry) is None:
                raise TableNotBuilt(name)
            spark.sql(f"SELECT * FROM {name}{_time_travel(version, as_of)}").createOrReplaceTempView(view_name(name))
            continue
        if open_table(lake.storage, entry) is None:
            raise TableNotBuilt(name)
        if version is not None or as_of:  # inside the time-travel window, or a clear refusal
            ensure_readable(lake.storage, entry, version, parse_as_of(as_of) if as_of else None,
                            lake.settings.time_travel_hours)
        reader = spark.read.format(entry.format)
        if version is not None:
            reader = reader.option("versionAsOf", version)
        if as_of:
            reader = reader.option("timestampAsOf", as_of)
        reader.load(entry.uri(lake.storage)).createOrReplaceTempView(view_name(name))
    if any("." in name for name in names):
        sql = bind_qualified_names(sql)
    frame = spark.sql(sql)
    rows = [tuple(row) for row in frame.collect()]
    render(frame.columns, rows, fmt)


class QueryEngine(StrEnum):
    spark = "spark"  # the configured Spark engine (Sail by default)
    duckdb = "duckdb"  # the BI read path: DuckDB over the same tables


def show_query_duckdb(lake: LakeSession, sql: str, fmt: Format) -> None:
    from lake_assets.resources import duckdb_reader

    columns, rows = duckdb_reader.query(lake.storage, sql)
    render(columns, rows, fmt)


def _time_travel(version: int | None, as_of: str | None) -> str:
    """The clause reading an Iceberg table at a snapshot id or timestamp, or nothing."""
    if version is not None:
        return f" VERSION AS OF {int(version)}"
    if as_of:
        return f" TIMESTAMP AS OF '{_timestamp_literal(as_of)}'"
    return ""


def _timestamp_literal(text: str) -> str:
    try:
        return dt.datetime.fromisoformat(text).isoformat(sep=" ")
    except ValueError:
        raise UsageError(f"--as-of must be an ISO timestamp, not {text!r}") from None


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
    """Run a read-only SQL query over the lake's tables by name (insurance, insurance_quarantine, lake_ledger).

    Only SELECT / WITH / set operations / VALUES over registered tables: no writes, no
    path-based tables, no file-reading functions.
    """
    with lake_session() as lake:
        if engine is QueryEngine.duckdb:
            if version is not None or as_of:
                raise UsageError("--version/--as-of need --engine spark")
            show_query_duckdb(lake, sql, fmt)
        else:
            show_query(lake, sql, fmt, version, as_of)


def show_history(lake: LakeSession, name: str, fmt: Format) -> None:
    from lake_assets.core.formats.delta import open_table

    if table(name).format is TableFormat.ICEBERG:
        show_iceberg_history(lake, name, fmt)
        return
    delta = open_table(lake.storage, table(name))
    if delta is None:
        raise UsageError(f"table {name} does not exist yet (nothing applied); see `lake status`")
    rows = []
    for entry in delta.history():
        metrics = entry.get("operationMetrics") or {}
        rows.append((
            entry["version"],
            _timestamp(entry.get("timestamp")),
            entry.get("operation"),
            metrics.get("numTargetRowsInserted", metrics.get("numOutputRows")),
            metrics.get("numTargetRowsUpdated"),
            metrics.get("numTargetRowsDeleted"),
            metrics.get("numAddedFiles", metrics.get("numFilesAdded")),
            metrics.get("numRemovedFiles", metrics.get("numFilesRemoved")),
        ))
    render(["version", "timestamp", "operation", "rows_inserted_or_written", "rows_updated", "rows_deleted",
            "files_added", "files_removed"], rows, fmt)


def show_iceberg_history(lake: LakeSession, name: str, fmt: Format) -> None:
    """An Iceberg table's snapshots (pyiceberg), newest first; the first column is the snapshot id."""
    from lake_assets.core.formats import iceberg

    current = iceberg.open_table(lake.storage, table(name))
    if current is None:
        raise UsageError(f"table {name} does not exist yet (nothing applied); see `lake status`")
    entries = iceberg.history(current)
    columns = ["snapshot_id", "timestamp", "operation", "added_records", "deleted_records", "total_records",
               "added_files", "deleted_files"]
    render(columns, [tuple(e[c] for c in columns) for e in entries], fmt)


def _timestamp(millis: int | None) -> str | None:
    return dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc).isoformat() if millis else None


@app.command()
@friendly
def history(
    name: Annotated[str, typer.Argument(metavar="TABLE", help="table name, e.g. insurance")],
    fmt: Annotated[Format, typer.Option("--format")] = Format.table,
) -> None:
    """A table's history, newest first: Delta versions or Iceberg snapshots (first column the id)."""
    with lake_session() as lake:
        show_history(lake, name, fmt)
