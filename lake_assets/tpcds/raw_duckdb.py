"""DuckDB views over the raw zone's TPC-DS files: the independent reading of the raw data.

The column names and types come from DuckDB's own `dsdgen` (an empty scale-0 star), not
from our loader's schema, so comparisons against these views check the loader too. The
views live in an in-memory database named like the Iceberg catalog (`lake.tpcds.web_sales`),
so the report SQL, which names the star's tables in their catalog, runs on them unchanged.
"""

import functools

import duckdb

from lake_assets.core.tables import ICEBERG_CATALOG
from lake_assets.resources.duckdb_extensions import load_extensions
from lake_assets.resources.duckdb_reader import add_s3_secret, connect
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds import raw_contract as contract


@functools.cache
def dsdgen_columns() -> dict[str, tuple[tuple[str, str], ...]]:
    """(column, DuckDB type) per star table, in dsdgen's column order."""
    con = connect(":memory:", "tpcds")
    try:
        con.execute("CALL dsdgen(sf=0)")
        return {table: tuple((row[0], row[1]) for row in con.execute(f"DESCRIBE {table}").fetchall())
                for table in contract.STAR_TABLES}
    finally:
        con.close()


def read_raw_sql(source: str, table: str, with_operation: bool = False, skip_malformed: bool = False,
                 filename: bool = False) -> str:
    """A `read_csv` over raw-contract files at `source` (a path or glob, local or s3://), as
    a table expression (`filename`: with the column of each line's file).

    Strict by default: a line that does not parse fails the read. With `skip_malformed`, the
    lines the loader quarantines for their shape are left out instead: a wrong field count,
    or a non-empty field that does not cast to its type (for a `D` line, only the keys are
    checked). The fields are read as text and cast in SQL, so every field of every line is
    checked whichever columns a query reads (a typed `read_csv` with `ignore_errors` skips
    a bad value only when its column is read).
    """
    columns = dsdgen_columns()[table]
    named = (("op", "VARCHAR"), *columns) if with_operation else columns
    options = "delim='|', header=false, quote='', escape='', nullstr='', auto_detect=false, hive_partitioning=false"
    if filename:
        options += ", filename=true"
    if not skip_malformed:
        spec = ", ".join(f"'{name}': '{kind}'" for name, kind in named)
        return f"read_csv('{source}', {options}, columns={{{spec}}})"
    spec = ", ".join(f"'{name}': 'VARCHAR'" for name, _ in named)
    casts = [f"TRY_CAST({name} AS {kind}) AS {name}" for name, kind in columns]

    def parses(name: str, kind: str) -> str:
        return f"({name} IS NULL OR TRY_CAST({name} AS {kind}) IS NOT NULL)"
    keys = [parses(name, kind) for name, kind in columns if name in contract.FACT_KEY or not with_operation]
    rest = [parses(name, kind) for name, kind in columns if name not in contract.FACT_KEY]
    valid = " AND ".join(keys + ([f"(op = 'D' OR ({' AND '.join(rest)}))"] if with_operation else []))
    selected = ", ".join([*(["op"] if with_operation else []), *casts, *(["filename"] if filename else [])])
    return (f"(SELECT {selected} FROM read_csv('{source}', {options}, ignore_errors=true, columns={{{spec}}}) "
            f"WHERE {valid})")


def raw_sources(storage: LakeStorage) -> dict[str, str]:
    """Glob of every star table's raw objects in `storage`."""
    sources = {table: storage.uri(contract.dimension_key(table)) for table in contract.DIMENSIONS}
    sources[contract.FACT] = storage.uri(f"{contract.FACT_PREFIX}*/*{contract.EXTENSION}")
    return sources


def create_raw_views(con: duckdb.DuckDBPyConnection, storage: LakeStorage, schema: str = "tpcds",
                     corrections: bool = False) -> None:
    """Views `lake.<schema>.<table>` over the raw objects in `storage` (loads httpfs, adds the S3 secret;
    attaches an in-memory database `lake`). Lines that do not parse are left out (`skip_malformed`):
    the loader quarantines them.

    With `corrections`, `lake.<schema>.web_sales` is the fact snapshot with every correction object
    applied the way the contract says (object keys in order, the last line per key wins, `D`
    deletes, `I`/`U` upsert); the line order within an object is DuckDB's scan order.
    """
    load_extensions(con, "httpfs")
    add_s3_secret(con, storage)
    con.execute(f"ATTACH IF NOT EXISTS ':memory:' AS {ICEBERG_CATALOG}")
    schema = f"{ICEBERG_CATALOG}.{schema}"
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    for table, source in raw_sources(storage).items():
        con.execute(f"CREATE OR REPLACE VIEW {schema}.{table} AS SELECT * FROM {read_raw_sql(source, table, skip_malformed=True)}")
    if not corrections or not storage.list_objects(contract.CDC_PREFIX):
        return
    columns = ", ".join(name for name, _ in dsdgen_columns()[contract.FACT])
    keys = ", ".join(contract.FACT_KEY)
    cdc = read_raw_sql(storage.uri(f"{contract.CDC_PREFIX}*{contract.EXTENSION}"), contract.FACT,
                       with_operation=True, skip_malformed=True, filename=True)
    snapshot = read_raw_sql(raw_sources(storage)[contract.FACT], contract.FACT, skip_malformed=True)
    con.execute(f"CREATE OR REPLACE VIEW {schema}.web_sales_snapshot AS SELECT * FROM {snapshot}")
    con.execute(f"""
        CREATE OR REPLACE VIEW {schema}.web_sales_changes AS
        SELECT * EXCLUDE (position, latest) FROM (
            SELECT *, row_number() OVER (PARTITION BY {keys} ORDER BY filename DESC, position DESC) AS latest
            FROM (SELECT *, row_number() OVER () AS position FROM {cdc}))
        WHERE latest = 1""")
    con.execute(f"""
        CREATE OR REPLACE VIEW {schema}.web_sales AS
        SELECT {columns} FROM {schema}.web_sales_snapshot ANTI JOIN {schema}.web_sales_changes USING ({keys})
        UNION ALL
        SELECT {columns} FROM {schema}.web_sales_changes WHERE op <> 'D'""")


def raw_connection(storage: LakeStorage, schema: str = "tpcds", corrections: bool = False) -> duckdb.DuckDBPyConnection:
    con = connect(":memory:")
    create_raw_views(con, storage, schema, corrections)
    return con
