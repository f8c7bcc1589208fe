"""DuckDB as the lake's second engine: the tests' independent oracle, benchmarks, TPC-DS tooling.

`lake_connection(storage)` gives a DuckDB connection in which the lake's tables have the
same names as in Spark SQL: Iceberg tables through the REST catalog (attached as `lake`,
each namespace on the search path, so `tpcds.web_sales` resolves) and Delta tables
(`insurance`, ...) as views over `delta_scan` on S3. Extensions come from their wheels
(`resources/duckdb_extensions.py`); nothing is downloaded at run time.

These connections can write; `lake query --engine duckdb` uses the sandboxed connection of
`resources/duckdb_sandbox.py` instead.
"""

from urllib.parse import urlparse

import duckdb

from lake_assets.core.tables import TABLES
from lake_assets.resources.catalog import CATALOG_NAME, find_catalog
from lake_assets.resources.duckdb_extensions import load_extensions
from lake_assets.resources.storage import LakeStorage

def connect(database: str = ":memory:", *extensions: str) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the given extensions loaded from their wheels; never downloads one."""
    con = duckdb.connect(database, config={"autoinstall_known_extensions": False,
                                           "autoload_known_extensions": False})
    load_extensions(con, *extensions)
    return con


def quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def add_s3_secret(con: duckdb.DuckDBPyConnection, storage: LakeStorage) -> None:
    """Let `con` read `s3://<bucket>/...` of this storage (httpfs must be loaded)."""
    key, secret = storage.credentials()
    url = urlparse(storage.endpoint_url)
    con.execute(
        f"CREATE OR REPLACE SECRET lake_s3 (TYPE s3, KEY_ID {quote(key)}, SECRET {quote(secret)}, "
        f"ENDPOINT {quote(url.netloc)}, URL_STYLE 'path', USE_SSL {str(url.scheme == 'https').lower()}, "
        f"REGION {quote(storage.region)})"
    )


def _delta_exists(con: duckdb.DuckDBPyConnection, uri: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM glob(?)", [f"{uri}/_delta_log/*.json"]).fetchone()[0])


def lake_connection(storage: LakeStorage) -> duckdb.DuckDBPyConnection:
    """DuckDB seeing every existing lake table under its registry name (see the module docstring)."""
    con = connect(":memory:", "httpfs", "delta")
    add_s3_secret(con, storage)
    search_path = ["memory.main"]
    catalog = find_catalog(storage)
    if catalog is not None:
        catalog.attach_duckdb(con)
        namespaces = con.execute("SELECT schema_name FROM duckdb_schemas() WHERE database_name = ? "
                                 "ORDER BY schema_name", [CATALOG_NAME]).fetchall()
        search_path += [f"{CATALOG_NAME}.{name}" for (name,) in namespaces]
    for table in TABLES.values():
        if table.format == "delta" and "." not in table.name and _delta_exists(con, table.uri(storage)):
            con.execute(f"CREATE OR REPLACE VIEW memory.main.{table.name} AS "
                        f"SELECT * FROM delta_scan({quote(table.uri(storage))})")
    con.execute(f"SET search_path = {quote(','.join(search_path))}")
    return con
