"""TPC-DS fixtures: one bucket with SF 0.01 generated into its raw zone (once per session; tests only add
objects beside it), the star loaded into the Iceberg catalog, a Sail session on both."""

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lake_assets.core.formats.delta import open_table as open_delta
from lake_assets.core.tables import LEDGER
from lake_assets.resources.embedded_s3 import EmbeddedS3
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.generate import GenerateResult, generate
from lake_assets.tpcds.schema import DIMENSIONS, TOMBSTONES, ledger_name
from lake_assets_tests.conftest import make_storage
from lake_assets_tests.helpers.iceberg import drop_namespace_tables
from lake_assets_tests.helpers.tpcds import load_star

SCALE = 0.01


@pytest.fixture(scope="session")
def raw_star(s3_server: EmbeddedS3, lake_home: Path) -> Iterator[tuple[LakeStorage, GenerateResult]]:
    """A bucket holding TPC-DS SF 0.01 in the raw zone, and what the generator reported."""
    storage = make_storage(s3_server.endpoint, lake_home, f"tpcds-{uuid.uuid4().hex[:12]}")
    result = generate(storage, SCALE)
    yield storage, result
    storage.delete_prefix("")
    storage.get_client().delete_bucket(Bucket=storage.bucket)


@pytest.fixture(scope="module")
def star_catalog(raw_star):
    """The catalog with no `tpcds` tables, no tombstones of web_sales (an earlier module's corrections
    deleted keys), and the session's raw star's ledger with no entry of a dimension: the module's star
    is loaded afresh (the change core applies only what is pending)."""
    storage, _ = raw_star
    catalog = storage.catalog()
    drop_namespace_tables(catalog, "tpcds")
    storage.delete_prefix(f"{TOMBSTONES.prefix}/")
    ledger = open_delta(storage, LEDGER)
    if ledger is not None:
        ledger.delete(f"table_name IN ({', '.join(repr(ledger_name(d)) for d in DIMENSIONS)})")
    return catalog


@pytest.fixture(scope="module")
def star_engine(raw_star, star_catalog):
    """A Sail session over the raw bucket whose catalog holds the star as Iceberg tables."""
    storage, _ = raw_star
    spark = SparkEngine().session(storage)
    load_star(storage, spark)
    return spark
