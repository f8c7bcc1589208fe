"""Whole lakes side by side on the session's S3 server: one per engine, compared table by table.

Each lake is its own bucket with its own Iceberg table bucket (`LAKE_ICEBERG_WAREHOUSE`), so
the session's engine and catalog are untouched, and `lake` runs in processes of its own with
the environment a user gives it. Tables are read by delta-rs (Delta) and pyiceberg (Iceberg),
not by the engine that wrote them.
"""

import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from lake_assets.core.tables import LEDGER, TABLES, TableFormat
from lake_assets.resources.catalog import LakeCatalog, find_catalog
from lake_assets.resources.embedded_s3 import EmbeddedS3
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.helpers.results import assert_same_rows

LAKE = str(Path(sys.executable).with_name("lake"))
#: Columns that record when or by which run a row was written: they differ between any two runs.
RUN_COLUMNS = {"run_id", "recorded_at", "_commit_timestamp", "_applied_at", "quarantined_at", "deleted_at",
               "table_uuid"}  # a tombstone names its Iceberg table: each lake's has its own uuid


@dataclass
class Lake:
    """A bucket + Iceberg warehouse on the session's S3 server, and the environment `lake` runs with there."""

    storage: LakeStorage
    env: dict[str, str]

    def lake(self, *args: str, extra: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
        return subprocess.run([LAKE, *args], env={**self.env, **(extra or {})}, capture_output=True, text=True,
                              timeout=timeout)

    def catalog(self) -> LakeCatalog:
        catalog = find_catalog(self.storage)
        assert catalog is not None
        return catalog

    def rows(self, name: str) -> list[tuple] | None:
        """The table's rows (run-stamped columns left out), None if it does not exist."""
        table = TABLES[name]
        if table.format is TableFormat.DELTA:
            try:
                data = DeltaTable(table.uri(self.storage), storage_options=self.storage.delta_storage_options())
            except Exception:  # noqa: BLE001 - deltalake raises TableNotFoundError (no common base) when absent
                return None
            arrow = pa.table(data.to_pyarrow_dataset().to_table())
        else:
            client = self.catalog().pyiceberg()
            if not client.table_exists(table.identifier):
                return None
            arrow = client.load_table(table.identifier).scan().to_arrow()
        arrow = arrow.drop_columns([c for c in arrow.column_names if c in RUN_COLUMNS])
        rows = arrow.to_pylist()
        if name == LEDGER.name:  # an Iceberg table's version is its snapshot id, random: compare that there is one
            for row in rows:
                if TABLES[row["table_name"]].format is TableFormat.ICEBERG:
                    row["table_version"] = row["table_version"] is not None
        return [tuple(row.values()) for row in rows]


def new_lake(s3_server: EmbeddedS3, lake_home: Path, name: str) -> Lake:
    suffix = uuid.uuid4().hex[:8]
    storage = LakeStorage(bucket=f"{name}-{suffix}", home=str(lake_home), warehouse=f"wh-{name}-{suffix}")
    storage = storage.with_endpoint(s3_server.endpoint)
    storage.ensure_bucket()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SAIL_", "LAKE_", "AWS_", "DAGSTER_HOME"))}
    env.update(LAKE_HOME=str(lake_home), LAKE_S3_BUCKET=storage.bucket, LAKE_ICEBERG_WAREHOUSE=storage.warehouse)
    return Lake(storage, env)


def drop(lake: Lake) -> None:
    lake.catalog().drop_namespace("tpcds")
    lake.storage.delete_prefix("")
    lake.storage.get_client().delete_bucket(Bucket=lake.storage.bucket)


def assert_same_tables(lake: Lake, reference: Lake, names: list[str]) -> set[str]:
    """Each of `names` exists in both lakes or in neither, with the same rows; returns those compared."""
    compared = set()
    for name in sorted(names):
        expected, actual = reference.rows(name), lake.rows(name)
        assert (actual is None) == (expected is None), name
        if expected is not None:
            assert_same_rows(actual, expected, name)
            compared.add(name)
    return compared
