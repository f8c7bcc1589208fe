"""TPC-DS test helpers."""

from lake_assets.resources.catalog import LakeCatalog
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds import raw_contract as contract
from lake_assets.tpcds.raw_duckdb import raw_connection


def load_star(storage: LakeStorage, catalog: LakeCatalog) -> None:
    """Put the raw star into the catalog's `tpcds.*` Iceberg tables (stand-in for the loader)."""
    con = raw_connection(storage, schema="raw")
    try:
        catalog.attach_duckdb(con)
        con.execute("CREATE SCHEMA IF NOT EXISTS lake.tpcds")
        for table in contract.STAR_TABLES:
            con.execute(f"CREATE TABLE lake.tpcds.{table} AS SELECT * FROM raw.{table}")
    finally:
        con.close()
