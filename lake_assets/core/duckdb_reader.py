"""DuckDB as the lake's second engine: extensions, S3, the Iceberg REST catalog, Delta tables.

Everything that opens a DuckDB connection on the lake goes through here: the TPC-DS
generator (the `tpcds` extension), `lake query --engine duckdb` (the BI read path) and
the tests that use DuckDB as an independent oracle. Extensions are loaded by file path
from their `duckdb-extension-*` wheels (no extension downloads happen at run time).
"""

import importlib.util
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlparse

import duckdb

from lake_assets.core.errors import EngineUnavailable
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import s3_credentials

#: Name the Iceberg REST catalog is attached under in a DuckDB connection.
ICEBERG_CATALOG = "lake_iceberg"


class Extension(StrEnum):
    tpcds = "tpcds"
    httpfs = "httpfs"
    avro = "avro"
    iceberg = "iceberg"
    delta = "delta"


def extension_path(extension: Extension) -> Path:
    """The extension file shipped in the `duckdb-extension-<name>` wheel for this DuckDB version."""
    spec = importlib.util.find_spec(f"duckdb_extension_{extension}")
    if spec is None or spec.origin is None:
        raise EngineUnavailable(f"DuckDB extension {extension} is not installed (duckdb-extension-{extension})")
    path = Path(spec.origin).parent / "extensions" / f"v{duckdb.__version__}" / f"{extension}.duckdb_extension"
    if not path.exists():
        raise EngineUnavailable(f"no {extension} extension for DuckDB {duckdb.__version__} at {path}")
    return path


def load(con: duckdb.DuckDBPyConnection, *extensions: Extension) -> duckdb.DuckDBPyConnection:
    for extension in extensions:
        con.execute(f"LOAD '{extension_path(extension)}'")
    return con


def connect(database: str = ":memory:", *extensions: Extension) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the given extensions loaded; never downloads anything."""
    con = duckdb.connect(database, config={"autoinstall_known_extensions": False,
                                           "autoload_known_extensions": False})
    return load(con, *extensions)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def add_s3_secret(con: duckdb.DuckDBPyConnection, storage: LakeStorage) -> None:
    """Let `con` read `s3://<bucket>/...` of this storage (httpfs must be loaded)."""
    key, secret = s3_credentials(storage.embedded)
    url = urlparse(storage.endpoint_url)
    con.execute(
        f"CREATE OR REPLACE SECRET lake_s3 (TYPE s3, KEY_ID {_quote(key)}, SECRET {_quote(secret)}, "
        f"ENDPOINT {_quote(url.netloc)}, URL_STYLE 'path', USE_SSL {str(url.scheme == 'https').lower()}, "
        f"REGION {_quote(storage.region)})"
    )


def attach_iceberg(con: duckdb.DuckDBPyConnection, storage: LakeStorage, catalog_uri: str,
                   warehouse: str, alias: str = ICEBERG_CATALOG) -> None:
    """ATTACH the Iceberg REST catalog at `catalog_uri` as `alias` (httpfs, avro, iceberg loaded).

    DuckDB fetches and refreshes the OAuth token itself from `<catalog_uri>/v1/oauth/tokens`
    with the S3 key and secret as client credentials.
    """
    key, secret = s3_credentials(storage.embedded)
    uri = catalog_uri.rstrip("/")
    con.execute(
        f"CREATE OR REPLACE SECRET lake_iceberg_oauth (TYPE iceberg, CLIENT_ID {_quote(key)}, "
        f"CLIENT_SECRET {_quote(secret)}, OAUTH2_SERVER_URI {_quote(uri + '/v1/oauth/tokens')})"
    )
    con.execute(f"ATTACH {_quote(warehouse)} AS {alias} (TYPE iceberg, SECRET lake_iceberg_oauth, "
                f"ENDPOINT {_quote(uri)})")
