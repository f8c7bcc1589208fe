"""The Iceberg REST catalog served by the embedded S3 server, seen by Sail, pyiceberg and DuckDB."""

import json
import os
import time
import uuid
from decimal import Decimal
from pathlib import Path

import duckdb
from pyspark.sql import SparkSession

from lake_assets.resources.catalog import CATALOG_NAME, TOKEN_REFRESH_SECONDS, LakeCatalog, catalog_uri
from lake_assets.resources.embedded_s3 import STATE_FILE, EmbeddedS3
from lake_assets.resources.storage import LakeStorage


def test_state_file_records_the_catalog_endpoint(s3_server: EmbeddedS3, storage: LakeStorage) -> None:
    state = json.loads((Path(storage.home) / STATE_FILE).read_text())
    assert state["catalog_endpoint"] == s3_server.catalog_endpoint
    assert catalog_uri(storage) == s3_server.catalog_endpoint
    assert s3_server.catalog_endpoint.startswith("http://127.0.0.1:")


def test_token_file_is_fresh_and_private(catalog: LakeCatalog) -> None:
    path = catalog.token_file()
    assert path.stat().st_mode & 0o077 == 0
    token = path.read_text()
    assert token.count(".") == 2  # a JWT
    # a stale file is rewritten with a new token
    old = time.time() - TOKEN_REFRESH_SECONDS - 5
    os.utime(path, (old, old))
    catalog.token_file()
    assert path.stat().st_mtime > old + 5


def test_sail_writes_pyiceberg_and_duckdb_read(catalog: LakeCatalog, spark: SparkSession, storage: LakeStorage) -> None:
    name = f"tpcds.probe_{uuid.uuid4().hex[:8]}"
    spark.sql("CREATE DATABASE IF NOT EXISTS tpcds")
    spark.sql(f"CREATE TABLE {name} (k BIGINT, d DATE, price DECIMAL(7,2)) USING iceberg PARTITIONED BY (days(d))")
    spark.sql(f"INSERT INTO {name} VALUES (1, DATE'2000-01-01', 1.50), (2, DATE'2000-01-02', 2.25), (3, NULL, NULL)")

    table = catalog.pyiceberg().load_table(name)
    assert table.current_snapshot() is not None
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["k"])
    assert [r["price"] for r in rows] == [Decimal("1.50"), Decimal("2.25"), None]
    assert str(table.schema().find_field("price").field_type) == "decimal(7, 2)"

    con = duckdb.connect()
    catalog.attach_duckdb(con)
    assert con.sql(f"SELECT sum(price), count(*) FROM {CATALOG_NAME}.{name}").fetchone() == (Decimal("3.75"), 3)

    # DuckDB commits through the same catalog; Sail sees it
    con.execute(f"INSERT INTO {CATALOG_NAME}.{name} VALUES (4, DATE '2000-01-03', 4.00)")
    assert spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0]["n"] == 4

    # Delta path tables keep working beside the default REST catalog
    path = storage.uri("curated/probe_delta")
    spark.range(5).write.format("delta").mode("overwrite").save(path)
    assert spark.sql(f"SELECT count(*) AS n FROM delta.`{path}`").collect()[0]["n"] == 5
