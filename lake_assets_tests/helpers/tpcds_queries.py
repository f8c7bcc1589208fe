"""TPC-DS's 99 query texts (DuckDB's `tpcds_queries()`), readable by `lake query`'s statement checks.

The queries read TPC-DS's 24 tables, which are not lake tables; each text is given those
names as CTEs (`WITH store_sales AS (SELECT 1), ...`), so a check that refuses other tables
still walks every function and clause the query uses. For Spark, double-quoted aliases
become backquoted (the one dialect difference, see DESIGN.md).
"""

import duckdb

from lake_assets.resources.duckdb_extensions import load_extensions

TPCDS_TABLES = ("call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer", "customer_address",
                "customer_demographics", "date_dim", "household_demographics", "income_band", "inventory", "item",
                "promotion", "reason", "ship_mode", "store", "store_returns", "store_sales", "time_dim", "warehouse",
                "web_page", "web_returns", "web_sales", "web_site")


def tpcds_queries() -> list[tuple[int, str]]:
    """(number, text) of the 99 queries, as DuckDB ships them."""
    con = duckdb.connect()
    load_extensions(con, "tpcds")
    try:
        return [(int(number), text) for number, text in con.execute("SELECT query_nr, query FROM tpcds_queries()")
                .fetchall()]
    finally:
        con.close()


def with_tables_as_ctes(text: str) -> str:
    """`text` with TPC-DS's tables defined as CTEs in front of its own."""
    tables = ", ".join(f"{name} AS (SELECT 1 AS x)" for name in TPCDS_TABLES)
    body = text.strip().rstrip(";")
    if body[:5].upper() == "WITH ":
        return f"WITH {tables}, {body[5:]}"
    return f"WITH {tables} {body}"
