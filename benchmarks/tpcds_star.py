"""TPC-DS web_sales star: raw -> Iceberg through the assets vs the bare engine on the same objects;
DuckDB's load of the same objects into Parquet; a 1% correction batch; every report on Sail and on
DuckDB over the Iceberg tables (before and after maintenance's compaction folds the corrections'
delete files in), on DuckDB over the same rows as local Parquet.

    uv run python benchmarks/tpcds_star.py --scale 1

Not a test: prints figures and ratios. One process (Sail is embedded, so its CPU time and RSS
are this process's) and one embedded S3 server under a temporary LAKE_HOME. Measured:

- through the assets: the pending TPC-DS run (dimensions, every sold day, checks) with
  `dg.materialize` on the lake's own Dagster instance (its dagster.yaml and Dagster settings), as
  `lake run` has it; wall, CPU (this process plus the S3 server) and peak RSS, and where the time went:
  every Dagster step (from the run's event log) and the web_sales load's own steps;
- bare engine: Sail reading the same raw objects (`spark.read.csv`, the contract's schema,
  hive-style discovery of the day folders) and appending each table to a new Iceberg table in
  the same catalog: no validation, no sequences, no ledger, no checks; run before and after
  ours (the reference is their mean: the load of a shared machine changes during a run);
- DuckDB: the same raw objects into local Parquet;
- the BI path: the six reports on DuckDB over the Iceberg tables (through the REST catalog and
  the S3 server) against DuckDB over the tables' current rows exported to local Parquet, each
  cold (a new connection) and warm (the same connection again), wall and CPU, as ratios.
"""

import argparse
import os
import resource
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from policy_data import RssSampler  # noqa: E402
from private_lake import private_lake  # noqa: E402

TARGET_RATIO, TARGET_GIB = 1.5, 6.0


class Measured:
    """Wall seconds, CPU seconds (this process and the S3 server) and peak RSS of one piece of work."""

    def __init__(self, server_pid: int, work: Callable[[], object]) -> None:
        cpu = _cpu(server_pid)
        with RssSampler() as rss:
            started = time.perf_counter()
            self.result = work()
            self.wall = time.perf_counter() - started
        self.cpu = _cpu(server_pid) - cpu
        self.gib = rss.peak_gib

    def row(self, name: str) -> str:
        return f"| {name} | {self.wall:.2f} | {self.cpu:.2f} | {self.gib:.2f} |"


def _cpu(server_pid: int) -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(f"/proc/{server_pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    server = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return usage.ru_utime + usage.ru_stime + server


def run_pending(storage, instance) -> dict[str, float]:  # LakeStorage, DagsterInstance
    """Materialize the pending TPC-DS run; return seconds per Dagster step."""
    import dagster as dg

    from lake_assets.resources.engine import SparkEngine
    from lake_assets.resources.rules import LakeRules
    from lake_assets.resources.storage_resource import StorageResource
    from lake_assets.settings import LakeSettings
    from lake_assets.tpcds.assets import TPCDS_ASSETS
    from lake_assets.tpcds.checks import TPCDS_CHECKS
    from lake_assets.jobs.tpcds import pending_run_request

    request = pending_run_request(storage)
    if request is None:
        return {}
    resources = {"storage": StorageResource(bucket=storage.bucket, home=storage.home), "engine": SparkEngine(),
                 "rules": LakeRules.from_settings(LakeSettings.from_env())}
    result = dg.materialize([*TPCDS_ASSETS, *TPCDS_CHECKS], instance=instance, resources=resources,
                            selection=request.asset_selection, tags=request.tags, run_config=request.run_config,
                            raise_on_error=True)
    assert result.success
    started: dict[str, float] = {}
    steps: dict[str, float] = {}
    for entry in instance.all_logs(result.run_id):
        event = entry.dagster_event
        if event is None or event.step_key is None:
            continue
        if event.event_type_value == "STEP_START":
            started[event.step_key] = entry.timestamp
        elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE") and event.step_key in started:
            steps[event.step_key] = entry.timestamp - started[event.step_key]
    return steps


def bare_engine(spark, storage) -> None:  # SparkSession, LakeStorage
    """Each star table read from its raw objects and appended to a new Iceberg table (namespace `bare`)."""
    from lake_assets.tpcds.schema import COLUMNS, PARTITION_COLUMN, RAW, TpcdsTable

    client = storage.catalog().pyiceberg()
    client.create_namespace_if_not_exists("bare")
    for name in (TpcdsTable.DATE_DIM, TpcdsTable.TIME_DIM, TpcdsTable.CUSTOMER, TpcdsTable.ITEM,
                 TpcdsTable.WEB_SALES):
        if client.table_exists(("bare", name)):
            client.purge_table(("bare", name))
        # the day folders name ws_sold_date_sk: the files' own field is read under another name, and the
        # folder's column (which a schema naming it would take from the path) is left out
        schema = ", ".join(f"{'_in_file_' if c == PARTITION_COLUMN else ''}{c} {t}" for c, t in COLUMNS[name])
        source = storage.uri(RAW.facts if name == TpcdsTable.WEB_SALES else RAW.dimension_key(name))
        frame = spark.read.csv(source, schema=schema, sep="|", header=False)
        if name == TpcdsTable.WEB_SALES:
            frame = frame.withColumnRenamed(f"_in_file_{PARTITION_COLUMN}", PARTITION_COLUMN)
        frame.writeTo(f"lake.bare.{name}").using("iceberg").create()


def _delete_files(storage) -> int:  # LakeStorage
    from lake_assets.core.formats import iceberg_maintenance
    from lake_assets.tpcds.schema import TpcdsTable, ledger_name

    return iceberg_maintenance.delete_files(storage.catalog().pyiceberg().load_table(ledger_name(TpcdsTable.WEB_SALES)))


def measure_reports(storage, spark, server_pid: int, local: Path) -> list[str]:  # LakeStorage, SparkSession
    """Every report on Sail, on DuckDB over the Iceberg tables and on DuckDB over the same rows as local
    Parquet (one file per table, exported from the Iceberg tables: like with like), each in a new connection
    (cold: nothing cached) then again (warm); the Iceberg reads before and after maintenance's compaction."""
    from lake_assets.core.formats import iceberg_maintenance
    from lake_assets.resources.duckdb_reader import connect, lake_connection
    from lake_assets.tpcds import raw_contract as contract
    from lake_assets.tpcds.reports import REPORTS
    from lake_assets.tpcds.schema import engine_name, ledger_name

    def all_reports(run: Callable[[str], object]) -> tuple[float, float]:
        cpu, started = _cpu(server_pid), time.perf_counter()
        for report in REPORTS:
            run(report.sql)
        return time.perf_counter() - started, _cpu(server_pid) - cpu

    local.mkdir()
    exporter = lake_connection(storage)
    for name in contract.STAR_TABLES:
        exporter.execute(f"COPY (SELECT * FROM lake.tpcds.{name}) TO '{local / name}.parquet' (FORMAT parquet)")

    def on_parquet():  # the same names as on the lake (`tpcds.x` and `lake.tpcds.x`)
        con = connect(":memory:")
        con.execute("ATTACH ':memory:' AS lake")
        con.execute("CREATE SCHEMA lake.tpcds")
        for name in contract.STAR_TABLES:
            con.execute(f"CREATE VIEW lake.tpcds.{name} AS SELECT * FROM '{local / name}.parquet'")
        con.execute("USE lake")
        return con

    def duckdb(connection: Callable[[], object]) -> tuple[tuple[float, float], tuple[float, float]]:
        con = connection()
        return all_reports(lambda sql: con.execute(sql).fetchall()), all_reports(lambda sql: con.execute(sql).fetchall())

    def files() -> str:
        client = storage.catalog().pyiceberg()
        return ", ".join(f"{name} {len(iceberg_maintenance.data_files(client.load_table(ledger_name(name))))}"
                         for name in contract.STAR_TABLES)

    lines = [f"\nall {len(REPORTS)} reports (seconds: wall / CPU of this process and the S3 server):"]
    sail = all_reports(lambda sql: spark.sql(sql).collect())
    lines.append(f"  Sail on Iceberg (with the corrections' delete files: {_delete_files(storage)}): "
                 f"{sail[0]:.2f} / {sail[1]:.2f}")
    measured = {"DuckDB on local Parquet": duckdb(on_parquet), f"DuckDB on Iceberg (data files: {files()})":
                duckdb(lambda: lake_connection(storage))}
    started = time.perf_counter()
    compacted = sum(iceberg_maintenance.compact(spark, client_table, engine_name(name)) for name, client_table in
                    ((n, storage.catalog().pyiceberg().load_table(ledger_name(n))) for n in contract.STAR_TABLES))
    lines.append(f"  maintenance compaction: {compacted} partition(s) in {time.perf_counter() - started:.2f} s")
    sail = all_reports(lambda sql: spark.sql(sql).collect())
    lines.append(f"  Sail on Iceberg after compaction (no delete file left): {sail[0]:.2f} / {sail[1]:.2f}")
    measured[f"DuckDB on Iceberg after compaction (data files: {files()})"] = duckdb(lambda: lake_connection(storage))
    measured["DuckDB on local Parquet, again"] = duckdb(on_parquet)
    parquet = [min(a, b) for a, b in zip(*(
        (*cold, *warm) for name, (cold, warm) in measured.items() if name.startswith("DuckDB on local Parquet")))]
    for name, (cold, warm) in measured.items():
        ratios = [f"{mine / base:.2f}x" for mine, base in zip((*cold, *warm), parquet)]
        lines.append(f"  {name}: cold {cold[0]:.2f} / {cold[1]:.2f}, warm {warm[0]:.2f} / {warm[1]:.2f}"
                     + ("" if name.startswith("DuckDB on local Parquet") else
                        f"; / Parquet: cold {ratios[0]} wall, {ratios[1]} CPU; warm {ratios[2]} wall, {ratios[3]} CPU"
                        f" (target {TARGET_RATIO}x)"))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--load-only", action="store_true", help="stop after the raw -> Iceberg comparison")
    parser.add_argument("--raw", type=Path, help="land these files (as `lake tpcds generate` writes them, keys "
                        "relative to the folder) instead of generating: generation is not what is measured, "
                        "and takes minutes at scale 10")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    with private_lake("lake-bench-", bucket="bench") as (home, server):
        _measure(args.scale, args.load_only, args.raw, home, server)


def _land(storage, scale: float, raw: Path | None) -> dict[str, int]:  # LakeStorage
    """Land the star's raw objects; rows per table."""
    from lake_assets.tpcds import raw_contract as contract
    from lake_assets.tpcds.generate import generate, upload_tree
    from lake_assets.tpcds.raw_duckdb import create_raw_views
    from lake_assets.resources.duckdb_reader import connect

    started = time.perf_counter()
    if raw is None:
        rows = generate(storage, scale).rows
    else:
        upload_tree(storage, raw)
        duck = connect(":memory:")
        create_raw_views(duck, storage, "raw")
        rows = {table: duck.execute(f"SELECT count(*) FROM lake.raw.{table}").fetchone()[0]
                for table in contract.STAR_TABLES}
    print(f"SF{scale:g}: {'generated and landed' if raw is None else f'landed {raw}'} in "
          f"{time.perf_counter() - started:.0f} s: {rows}", flush=True)
    return rows


def _measure(scale: float, load_only: bool, raw: Path | None, home: Path, server) -> None:  # EmbeddedS3
    from lake_assets.cli.session import dagster_instance
    from lake_assets.resources.duckdb_reader import connect
    from lake_assets.resources.engine import SparkEngine
    from lake_assets.resources.storage import LakeStorage
    from lake_assets.settings import LakeSettings
    from lake_assets.tpcds import load
    from lake_assets.tpcds import raw_contract as contract
    from lake_assets.tpcds.correction_batch import land_corrections
    from lake_assets.tpcds.raw_duckdb import create_raw_views

    settings = LakeSettings.from_env()
    storage = LakeStorage.from_settings(settings).with_endpoint(server.endpoint)
    storage.ensure_bucket()
    storage.catalog()
    generated_rows = _land(storage, scale, raw)
    spark = SparkEngine.from_settings(settings).session(storage)
    spark.sql("SELECT 1").collect()  # the engine's start is not what we measure

    measured: dict[str, Measured] = {}
    measured["bare Sail, before ours"] = Measured(server.pid, lambda: bare_engine(spark, storage))
    print(measured["bare Sail, before ours"].row("bare"), flush=True)

    load_steps: dict[str, float] = {}
    original = load.finish_report

    def finish_report(storage, report, started):  # the load's own steps, as it timed them
        if report.table.endswith("web_sales"):
            load_steps.update({k: load_steps.get(k, 0.0) + v for k, v in report.steps.items()})
            load_steps["load_fact_days (total)"] = load_steps.get("load_fact_days (total)", 0.0) + \
                time.perf_counter() - started
        return original(storage, report, started)
    load.finish_report = finish_report
    # the lake's own Dagster instance, as `lake run` has it: its dagster.yaml (sqlite, the event log
    # that stores a range run's materializations as one batch) and its Dagster settings
    instance = dagster_instance(settings)
    ours = measured["raw -> Iceberg through the assets (with checks)"] = Measured(
        server.pid, lambda: run_pending(storage, instance))
    load.finish_report = original
    print(ours.row("ours"), flush=True)
    measured["bare Sail, after ours"] = Measured(server.pid, lambda: bare_engine(spark, storage))
    before, after = measured["bare Sail, before ours"], measured["bare Sail, after ours"]
    bare_wall, bare_cpu = (before.wall + after.wall) / 2, (before.cpu + after.cpu) / 2

    reports: list[str] = []
    if not load_only:
        parquet = home / "parquet"
        parquet.mkdir()
        duck = connect(":memory:")
        create_raw_views(duck, storage, "raw")

        def duckdb_load() -> None:
            for table in contract.STAR_TABLES:
                duck.execute(f"COPY lake.raw.{table} TO '{parquet / table}.parquet' (FORMAT parquet)")
        measured["raw -> Parquet (DuckDB)"] = Measured(server.pid, duckdb_load)
        count = max(1, generated_rows[contract.FACT] // 100)
        land_corrections(storage, count)
        measured["apply 1% corrections (through the assets)"] = Measured(
            server.pid, lambda: run_pending(storage, instance))

        reports = measure_reports(storage, spark, server.pid, home / "star")
    print(f"\n| work (SF{scale:g}, {os.cpu_count()} cores) | wall s | CPU s | peak RSS GiB |\n|---|---|---|---|")
    for name, figure in measured.items():
        print(figure.row(name))
    print(f"\nthrough the assets / bare Sail (mean of before and after): wall {ours.wall / bare_wall:.2f}x, "
          f"CPU {ours.cpu / bare_cpu:.2f}x (target {TARGET_RATIO}x each, peak <= {TARGET_GIB:g} GiB: "
          f"{ours.gib:.2f})")
    print("\nwhere the time went (Dagster steps, seconds):")
    for step, spent in sorted(ours.result.items(), key=lambda item: -item[1]):  # type: ignore[union-attr]
        print(f"  {step}: {spent:.2f}")
    print("web_sales load steps (seconds): " + ", ".join(f"{k} {v:.2f}" for k, v in load_steps.items()))
    if "apply 1% corrections (through the assets)" in measured:
        print(f"1% corrections / full load: {measured['apply 1% corrections (through the assets)'].wall / ours.wall:.2f}x"
              " (target 0.1x)")
    print("\n".join(reports))


if __name__ == "__main__":
    main()
