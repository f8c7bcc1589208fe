"""TPC-DS web_sales star: raw -> Iceberg through the assets, vs. DuckDB's load of the same files into
Parquet; a 1% correction batch; every report on Sail, on DuckDB over Iceberg, on DuckDB over Parquet.

    uv run python benchmarks/tpcds_star.py --scale 1

Not a test: prints figures and ratios. Uses a fresh embedded S3 server under a temporary LAKE_HOME.
"""

import argparse
import tempfile
import time
from pathlib import Path

import dagster as dg

from lake_assets.resources.catalog import lake_catalog
from lake_assets.resources.duckdb_reader import connect, lake_connection
from lake_assets.resources.embedded_s3 import free_port, start_server, stop_server
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.resources.storage_resource import StorageResource
from lake_assets.settings import EMBEDDED_ACCESS_KEY_ID, EMBEDDED_SECRET_ACCESS_KEY
from lake_assets.tpcds import raw_contract as contract
from lake_assets.tpcds.assets import TPCDS_ASSETS
from lake_assets.tpcds.checks import TPCDS_CHECKS
from lake_assets.tpcds.correction_batch import land_corrections
from lake_assets.tpcds.jobs import pending_run_request
from lake_assets.tpcds.raw_duckdb import create_raw_views
from lake_assets.tpcds.reports import REPORTS


def timed(work) -> tuple[float, object]:
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


def run_pending(storage: LakeStorage, instance: dg.DagsterInstance) -> None:
    request = pending_run_request(storage)
    if request is None:
        return
    resources = {"storage": StorageResource(bucket=storage.bucket, home=storage.home), "engine": SparkEngine()}
    result = dg.materialize([*TPCDS_ASSETS, *TPCDS_CHECKS], instance=instance, resources=resources,
                            selection=request.asset_selection, tags=request.tags, raise_on_error=True)
    assert result.success


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="lake-bench-"))
    server = start_server(home, free_port(), EMBEDDED_ACCESS_KEY_ID, EMBEDDED_SECRET_ACCESS_KEY)
    figures: dict[str, float] = {}
    try:
        storage = LakeStorage(home=str(home), bucket="bench").with_endpoint(server.endpoint)
        storage.ensure_bucket()
        lake_catalog(storage)
        from lake_assets.tpcds.generate import generate
        figures["generate + land raw"], generated = timed(lambda: generate(storage, args.scale))
        print(f"SF{args.scale:g}: {generated.rows}")
        instance = dg.DagsterInstance.ephemeral()
        SparkEngine().session(storage)  # start the engine outside the timings
        figures["raw -> Iceberg (assets, Sail)"], _ = timed(lambda: run_pending(storage, instance))

        parquet = home / "parquet"
        parquet.mkdir()
        duck = connect(":memory:")
        create_raw_views(duck, storage, "raw")

        def duckdb_load() -> None:
            for table in contract.STAR_TABLES:
                duck.execute(f"COPY raw.{table} TO '{parquet / table}.parquet' (FORMAT parquet)")
        figures["raw -> Parquet (DuckDB)"], _ = timed(duckdb_load)

        count = max(1, generated.rows[contract.FACT] // 100)
        figures["land 1% corrections"], _ = timed(lambda: land_corrections(storage, count))
        figures["apply 1% corrections (MERGE)"], _ = timed(lambda: run_pending(storage, instance))

        spark = SparkEngine().session(storage)
        on_iceberg = lake_connection(storage)
        on_parquet = connect(":memory:")
        on_parquet.execute("CREATE SCHEMA tpcds")
        for table in contract.STAR_TABLES:
            on_parquet.execute(f"CREATE VIEW tpcds.{table} AS SELECT * FROM '{parquet / table}.parquet'")
        for engine, run in (("Sail", lambda sql: spark.sql(sql).collect()),
                            ("DuckDB on Iceberg", lambda sql: on_iceberg.execute(sql).fetchall()),
                            ("DuckDB on Parquet", lambda sql: on_parquet.execute(sql).fetchall())):
            total = 0.0
            for report in REPORTS:
                seconds, _ = timed(lambda: run(report.sql))  # noqa: B023 - called here, in this iteration
                total += seconds
            figures[f"all {len(REPORTS)} reports, {engine}"] = total
    finally:
        stop_server(home, server)
    print(f"\n| step (SF{args.scale:g}) | seconds |\n|---|---|")
    for step, seconds in figures.items():
        print(f"| {step} | {seconds:.2f} |")
    load, reference = figures["raw -> Iceberg (assets, Sail)"], figures["raw -> Parquet (DuckDB)"]
    print(f"\ningestion / DuckDB load: {load / reference:.2f}x (target 1.5x)")
    print(f"1% corrections / full load: {figures['apply 1% corrections (MERGE)'] / load:.2f}x (target 0.2x)")
    bi = figures[f"all {len(REPORTS)} reports, DuckDB on Iceberg"] / figures[f"all {len(REPORTS)} reports, DuckDB on Parquet"]
    print(f"BI path (DuckDB on Iceberg) / DuckDB on Parquet: {bi:.2f}x (target 1.2x)")


if __name__ == "__main__":
    main()
