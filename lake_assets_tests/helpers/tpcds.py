"""TPC-DS test data: DuckDB's dsdgen, landed in the raw zone exactly as the contract says.

A stand-in for `lake tpcds generate` (the generator helper's module replaces it): `|`
separated, no header, NULL as an empty field, one web_sales object per sold date plus one
for the rows without a sold date. The DuckDB connection that generated the data is the
oracle the tests compare with.
"""

import datetime as dt
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb

from lake_assets.resources.duckdb_extensions import load_extensions
from lake_assets.resources.storage import LakeStorage
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.registry import star_declarations
from lake_assets.tpcds.schema import COLUMNS, DIMENSIONS, RAW, TpcdsTable, date_sk

_generated: dict[float, duckdb.DuckDBPyConnection] = {}


def generated(scale: float) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection holding the TPC-DS tables at `scale` (generated once per process)."""
    if scale not in _generated:
        con = duckdb.connect()
        load_extensions(con, "tpcds")
        con.execute(f"CALL dsdgen(sf={scale})")
        _generated[scale] = con
    return _generated[scale].cursor()


def delimited(con: duckdb.DuckDBPyConnection, query: str) -> bytes:
    """The query's rows as the raw zone holds them (`|`, no header, NULL empty, no quoting)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "out.dat"
        con.execute(f"COPY ({query}) TO '{path}' (FORMAT csv, DELIMITER '|', HEADER false, QUOTE '', ESCAPE '')")
        return path.read_bytes()


def land_dimensions(storage: LakeStorage, con: duckdb.DuckDBPyConnection) -> None:
    for table in DIMENSIONS:
        storage.put_bytes(RAW.dimension_key(table), delimited(con, _select(table)))


def sold_dates(con: duckdb.DuckDBPyConnection) -> list[dt.date | None]:
    """Every sold date of web_sales (None for the rows without one), in order."""
    rows = con.sql("SELECT DISTINCT d_date FROM web_sales LEFT JOIN date_dim ON ws_sold_date_sk = d_date_sk "
                   "ORDER BY d_date NULLS LAST").fetchall()
    return [r[0] for r in rows]


def fact_query(day: dt.date | None) -> str:
    condition = ("ws_sold_date_sk IS NULL" if day is None else
                 f"ws_sold_date_sk = (SELECT d_date_sk FROM date_dim WHERE d_date = DATE '{day}')")
    return f"{_select(TpcdsTable.WEB_SALES)} WHERE {condition}"


def fact_key(day: dt.date | None) -> str:
    return f"{RAW.fact_folder(day)}part-00000.dat"


def land_facts(storage: LakeStorage, con: duckdb.DuckDBPyConnection,
               days: list[dt.date | None] | None = None) -> list[str]:
    """One object per sold date (all dates unless `days` is given); returns the keys."""
    columns = ", ".join(name for name, _ in COLUMNS[TpcdsTable.WEB_SALES])
    text = delimited(con, f"SELECT coalesce(CAST(d_date AS VARCHAR), ''), {columns} FROM web_sales "
                          "LEFT JOIN date_dim ON ws_sold_date_sk = d_date_sk ORDER BY ws_order_number, ws_item_sk")
    by_day: dict[dt.date | None, list[str]] = {}
    for line in text.decode().splitlines():
        day, _, rest = line.partition("|")
        by_day.setdefault(dt.date.fromisoformat(day) if day else None, []).append(rest)
    chosen = list(by_day if days is None else days)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda day: storage.put_bytes(fact_key(day), ("\n".join(by_day[day]) + "\n").encode()), chosen))
    return [fact_key(day) for day in chosen]


def star_declaration(table: str, group: str, table_format: str = "iceberg", history: bool = False) -> TableDeclaration:
    """The star's `table` as its file declares it (`lake_assets/tables/tpcds/<table>.yaml`), named
    `<group>_<table>` in the catalog namespace `group` (the star's own is `tpcds`; a declared table's
    name also names its quarantine, tombstones and history, which must not be the star's), kept as
    `table_format` (on Delta, which has no partition transforms, whole) and with SCD2 history if
    `history`."""
    declared = star_declarations()[table].model_dump()
    partition_by = declared["partition_by"] if table_format == "iceberg" else ()
    return TableDeclaration.model_validate({**declared, "name": f"{group}_{table}", "group": group,
                                            "format": table_format, "history": history, "partition_by": partition_by})


def _select(table: str) -> str:
    return f"SELECT {', '.join(name for name, _ in COLUMNS[table])} FROM {table}"


def load_star(storage: LakeStorage, spark) -> None:  # a SparkSession
    """Load the raw star into the catalog's `tpcds.*` Iceberg tables: every day with the star's loader,
    every dimension's pending export with the change core."""
    from lake_assets.tpcds.load import fact_objects, load_dimension, load_fact_days

    load_fact_days(storage, spark, list(fact_objects(storage)), "test-load")
    for name in DIMENSIONS:
        load_dimension(storage, spark, name, "test-load")


def day_line(day: dt.date, item: int, order: int, quantity: int = 1) -> str:
    """A hand-made web_sales line sold on `day`: its key (item, order), a quantity, other fields empty."""
    fields = [""] * len(COLUMNS[TpcdsTable.WEB_SALES])
    fields[0], fields[3], fields[17], fields[18] = str(date_sk(day)), str(item), str(order), str(quantity)
    return "|".join(fields)


def put_day(storage: LakeStorage, day: dt.date, lines: list[str]) -> str:
    """Deliver `day`'s object holding `lines`; returns its key."""
    storage.put_bytes(fact_key(day), "".join(f"{line}\n" for line in lines).encode())
    return fact_key(day)


def land_small_dimensions(storage: LakeStorage, days: list[dt.date]) -> None:
    """The four dimension snapshots, a few rows each (date_dim: `days`): the star and its reports, tiny."""
    con = generated(0.01)
    dates = ", ".join(f"DATE '{day}'" for day in days)
    for table in DIMENSIONS:
        where = f"WHERE d_date IN ({dates})" if table == TpcdsTable.DATE_DIM else "ORDER BY 1 LIMIT 5"
        storage.put_bytes(RAW.dimension_key(table), delimited(con, f"{_select(table)} {where}"))
