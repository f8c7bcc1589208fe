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

import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from lake_assets.core.tables import TABLES
from lake_assets.resources.embedded_s3 import EmbeddedS3
from lake_assets.resources.storage import LakeStorage
from lake_assets_tests.conftest import DATA
from lake_assets_tests.helpers.lakes import LAKE, Lake, assert_same_tables, drop, new_lake
from lake_assets.tpcds.schema import RAW
from lake_assets_tests.helpers.tpcds import delimited, fact_query, generated, land_dimensions, land_facts, sold_dates

pytestmark = pytest.mark.cluster

CLUSTER = {"SAIL_MODE": "local-cluster", "SAIL_CLUSTER__WORKER_INITIAL_COUNT": "2",
           "SAIL_EXECUTION__DEFAULT_PARALLELISM": "2"}


def _land_inputs(storage: LakeStorage) -> None:
    """The seed's insurance drops and a small TPC-DS star with a correction (an update and a
    delete: the merge-on-read MERGE): what every lake here applies."""
    storage.put_bytes("raw/fullload/full-load.csv", (DATA / "fullload" / "full-load.csv").read_bytes())
    for file in sorted((DATA / "cdcload").glob("*.csv")):
        storage.put_bytes(f"raw/cdcload/{file.name}", file.read_bytes())
    oracle = generated(0.01)
    land_dimensions(storage, oracle)
    days = [*sold_dates(oracle)[:4], None]
    land_facts(storage, oracle, days)
    first, second = delimited(oracle, fact_query(days[0])).decode().splitlines()[:2]
    changed = first.split("|")
    changed[18] = "999"  # ws_quantity
    storage.put_bytes(f"{RAW.corrections}20240101-000000000.dat", f"U|{'|'.join(changed)}\nD|{second}\n".encode())


@pytest.fixture(scope="module")
def local_lake(s3_server: EmbeddedS3, lake_home: Path) -> Iterator[Lake]:
    """Both domains applied by `lake run` on the embedded engine in local mode: the reference."""
    lake = new_lake(s3_server, lake_home, "local")
    _land_inputs(lake.storage)
    run = lake.lake("run", extra={"SAIL_MODE": "local"})
    assert run.returncode == 0, run.stdout + run.stderr
    yield lake
    drop(lake)


@pytest.fixture
def other_lake(s3_server: EmbeddedS3, lake_home: Path) -> Iterator[Lake]:
    lake = new_lake(s3_server, lake_home, "other")
    yield lake
    drop(lake)


def _assert_same_tables(lake: Lake, reference: Lake) -> None:
    compared = assert_same_tables(lake, reference, list(TABLES))
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
        url, printed = None, []
        for line in server.stdout:  # the server says where it listens, then serves until stopped
            printed.append(line)
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
        server.wait(timeout=60)
        # the rest through the same reader: communicate(timeout=...) reads the pipe itself and would
        # drop what the line reader above had already buffered
        output = "".join(printed) + server.stdout.read()
    assert server.returncode == 130 and "interrupted" in output, output
    assert secret not in output and url in output
    _assert_same_tables(other_lake, local_lake)
