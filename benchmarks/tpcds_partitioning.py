"""Measure web_sales partitioning choices on this machine (not a test): the loader's
truncate(ws_sold_date_sk, PARTITION_DAYS) with days replaced by MERGE, vs identity on ws_sold_date_sk
(one partition per day, replaced by overwrite(condition)), at a given scale.

    uv run python benchmarks/tpcds_partitioning.py --scale 1

Prints, for each layout: load time of every day through the engine, data files, a full
scan, a one-month range query (TPC-DS Q12's shape) and the re-load of one day.
"""

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from pyspark.sql import functions as F

from lake_assets.core.formats import iceberg
from lake_assets.core.tables import TPCDS_WEB_SALES
from lake_assets.resources.embedded_s3 import embedded_s3, free_port
from lake_assets.resources.engine import SparkEngine
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import embedded_credentials
from lake_assets.tpcds.load import fact_objects, load_fact_days
from lake_assets.tpcds.schema import PARTITION_DAYS
from lake_assets_tests.helpers.tpcds import generated, land_facts, sold_dates


def timed(label: str, work) -> float:
    started = time.perf_counter()
    result = work()
    seconds = time.perf_counter() - started
    print(f"  {label:<40} {seconds:8.2f} s" + (f"  ({result})" if result is not None else ""), flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="lake-bench-"))
    with embedded_s3(home, free_port(), embedded_credentials(home)) as server:
        storage = LakeStorage(bucket="bench", home=str(home)).with_endpoint(server.endpoint)
        storage.ensure_bucket()
        oracle = generated(args.scale)
        timed("land raw objects", lambda: len(land_facts(storage, oracle)))
        print(f"  raw bytes: {sum(o['Size'] for o in storage.list_objects('raw/tpcds/web_sales/'))}")
        spark = SparkEngine().session(storage)
        storage.catalog()
        days = list(fact_objects(storage))
        print(f"truncate(ws_sold_date_sk, {PARTITION_DAYS}), the loader's layout:")
        report = load_fact_days(storage, spark, days, "bench")
        print(f"  load every day (one run)                 {report.duration_seconds:8.2f} s  "
              f"({report.rows_after} rows; steps {report.steps})")
        table = iceberg.open_table(storage, TPCDS_WEB_SALES)
        print(f"  data files: {len(table.inspect.files())}")
        month = sold_dates(oracle)[400]
        q = (f"SELECT count(*), sum(ws_ext_sales_price) FROM tpcds.web_sales JOIN tpcds_bench.dd ON "
             f"ws_sold_date_sk = d_date_sk WHERE d_date BETWEEN DATE'{month}' AND DATE'{month}' + INTERVAL 30 DAYS")
        spark.sql("CREATE DATABASE IF NOT EXISTS tpcds_bench")
        oracle_dates = oracle.sql("SELECT d_date_sk, d_date FROM date_dim").df()
        spark.createDataFrame(oracle_dates).writeTo("tpcds_bench.dd").using("iceberg").create()
        timed("full scan sum", lambda: spark.sql("SELECT sum(ws_net_paid) FROM tpcds.web_sales").collect()[0][0])
        timed("30-day range via date_dim join", lambda: spark.sql(q).collect()[0][0])
        timed("re-load one day", lambda: load_fact_days(storage, spark, [month], "bench-2").rows_after)

        print("identity(ws_sold_date_sk), one partition per day:")
        name = f"tpcds_bench.ws_{uuid.uuid4().hex[:6]}"
        source = spark.table("tpcds.web_sales")
        timed("write every row (one commit)",
              lambda: source.writeTo(name).using("iceberg").partitionedBy("ws_sold_date_sk").create())
        daily = storage.catalog().pyiceberg().load_table(name)
        print(f"  data files: {len(daily.inspect.files())}")
        qd = q.replace("tpcds.web_sales", name)
        timed("full scan sum", lambda: spark.sql(f"SELECT sum(ws_net_paid) FROM {name}").collect()[0][0])
        timed("30-day range via date_dim join", lambda: spark.sql(qd).collect()[0][0])
        sk = spark.sql(f"SELECT d_date_sk FROM tpcds_bench.dd WHERE d_date = DATE'{month}'").collect()[0][0]
        day = spark.table(name).where(F.col("ws_sold_date_sk") == sk)
        timed("re-load one day (overwrite by condition)",
              lambda: day.writeTo(name).overwrite(F.col("ws_sold_date_sk") == F.lit(sk)))


if __name__ == "__main__":
    main()
