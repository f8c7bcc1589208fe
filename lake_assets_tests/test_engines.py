"""The `cluster` tier: both domains on Sail's distributed runtime and on a Sail server run elsewhere.

Each lake below is its own bucket on the session's S3 server with its own Iceberg table
bucket (`LAKE_ICEBERG_WAREHOUSE`), so the session's engine and catalog are untouched, and
every engine runs in processes of its own, started the way a user starts them:

- local: `lake run` with `SAIL_MODE=local` (the embedded engine as everyone runs it);
- local-cluster: `lake run` with `SAIL_MODE=local-cluster` and 2 workers (a driver and two
  workers exchanging data over gRPC inside that process: Sail's Kubernetes runtime, on one
  machine);
- remote: `lake engine serve` in one process, `LAKE_SPARK_REMOTE=sc://...  lake run` in another.

The same raw input (the seed's insurance full load and CDC batches, the TPC-DS dimensions and
four days of web_sales at SF 0.01) lands in each; every table then must hold the same rows
as the local lake's, read by delta-rs (Delta) and pyiceberg (Iceberg), not by the engine.
"""

import os
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lake_assets.core.tables import LEDGER, TABLES, TableFormat
from lake_assets.resources.catalog import LakeCatalog, find_catalog
from lake_assets.resources.embedded_s3 import EmbeddedS3
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.conftest import DATA
from lake_assets_tests.helpers.results import assert_same_rows
from lake_assets_tests.helpers.tpcds import generated, land_dimensions, land_facts, sold_dates

pytestmark = pytest.mark.cluster

LAKE = str(Path(sys.executable).with_name("lake"))
#: Columns that record when or by which run a row was written: they differ between any two runs.
RUN_COLUMNS = {"run_id", "recorded_at", "_commit_timestamp", "_applied_at", "quarantined_at", "deleted_at"}
CLUSTER = {"SAIL_MODE": "local-cluster", "SAIL_CLUSTER__WORKER_INITIAL_COUNT": "2",
           "SAIL_EXECUTION__DEFAULT_PARALLELISM": "2"}


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


def _new_lake(s3_server: EmbeddedS3, lake_home: Path, name: str) -> Lake:
    suffix = uuid.uuid4().hex[:8]
    storage = LakeStorage(bucket=f"{name}-{suffix}", home=str(lake_home), warehouse=f"wh-{name}-{suffix}")
    storage = storage.with_endpoint(s3_server.endpoint)
    storage.ensure_bucket()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SAIL_", "LAKE_", "AWS_", "DAGSTER_HOME"))}
    env.update(LAKE_HOME=str(lake_home), LAKE_S3_BUCKET=storage.bucket, LAKE_ICEBERG_WAREHOUSE=storage.warehouse)
    return Lake(storage, env)


def _land_inputs(storage: LakeStorage) -> None:
    """The seed's insurance drops and a small TPC-DS star: what every lake here applies."""
    storage.put_bytes("raw/fullload/full-load.csv", (DATA / "fullload" / "full-load.csv").read_bytes())
    for file in sorted((DATA / "cdcload").glob("*.csv")):
        storage.put_bytes(f"raw/cdcload/{file.name}", file.read_bytes())
    oracle = generated(0.01)
    land_dimensions(storage, oracle)
    land_facts(storage, oracle, [*sold_dates(oracle)[:4], None])


def _drop(lake: Lake) -> None:
    lake.catalog().drop_namespace("tpcds")
    lake.storage.delete_prefix("")
    lake.storage.get_client().delete_bucket(Bucket=lake.storage.bucket)


@pytest.fixture(scope="module")
def local_lake(s3_server: EmbeddedS3, lake_home: Path) -> Iterator[Lake]:
    """Both domains applied by `lake run` on the embedded engine in local mode: the reference."""
    lake = _new_lake(s3_server, lake_home, "local")
    _land_inputs(lake.storage)
    run = lake.lake("run", extra={"SAIL_MODE": "local"})
    assert run.returncode == 0, run.stdout + run.stderr
    yield lake
    _drop(lake)


@pytest.fixture
def other_lake(s3_server: EmbeddedS3, lake_home: Path) -> Iterator[Lake]:
    lake = _new_lake(s3_server, lake_home, "other")
    yield lake
    _drop(lake)


def _assert_same_tables(lake: Lake, reference: Lake) -> None:
    compared = set()
    for name in sorted(TABLES):
        expected, actual = reference.rows(name), lake.rows(name)
        assert (actual is None) == (expected is None), name
        if expected is not None:
            assert_same_rows(actual, expected, name)
            compared.add(name)
    # every table both domains build from this input was compared (quarantine and tombstones: if any)
    assert compared >= {n for n in TABLES if "quarantine" not in n and "tombstones" not in n}, compared


def test_local_cluster_gives_the_local_tables(local_lake: Lake, other_lake: Lake) -> None:
    _land_inputs(other_lake.storage)
    # Sail logs its workers at INFO: the run's own output shows a driver with two workers did the work
    run = other_lake.lake("run", extra={**CLUSTER, "RUST_LOG": "sail_execution=info"})
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert set(re.findall(r"worker (\d+) server is ready", run.stderr)) >= {"1", "2"}, run.stderr[-3000:]
    _assert_same_tables(other_lake, local_lake)


def test_a_sail_server_started_by_lake_engine_serve_runs_the_lake(local_lake: Lake, other_lake: Lake) -> None:
    _land_inputs(other_lake.storage)
    with socket.socket() as taken:  # a port someone else holds: one line, no traceback
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        refused = other_lake.lake("engine", "serve", "--port", str(taken.getsockname()[1]))
    assert refused.returncode != 0 and "could not listen" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    server = subprocess.Popen([LAKE, "engine", "serve", "--port", "0"], env=other_lake.env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        url = None
        for line in server.stdout:  # the server says where it listens, then serves until stopped
            found = re.search(r"sc://127\.0\.0\.1:\d+", line)
            if found:
                url = found.group(0)
                break
        assert url, "lake engine serve printed no address"
        key, secret = other_lake.storage.credentials()
        run = other_lake.lake("run", extra={"LAKE_SPARK_REMOTE": url})
        assert run.returncode == 0, run.stdout + run.stderr
        assert secret not in run.stdout + run.stderr
    finally:
        server.terminate()
        output = server.communicate(timeout=60)[0]
    assert server.returncode == 130 and "interrupted" in output, output
    assert secret not in output and url in output
    _assert_same_tables(other_lake, local_lake)
