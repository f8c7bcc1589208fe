"""Benchmark: a CDC commit with Delta deletion vectors, against the lake's copy-on-write commit.

    uv run --group bench python benchmarks/deletion_vectors.py [--rows 2000000] [--changes 1000]

Issue 29's target for a 1,000-row CDC batch into a 2M-row table is missed because the batch's
keys are spread over the table: every file holds one of them, so the lake's commit
(core/apply/commit.py, a copy-on-write replace of the files holding the keys) rewrites the whole
table, and so does a copy-on-write `MERGE INTO`. A deletion vector marks the replaced rows of a
file as deleted instead, and only the changed rows are written. This measures, on a private lake
(embedded S3, embedded Sail), the same batch committed three ways to three copies of one table
clustered as the lake clusters it: the lake's commit (the baseline), Sail's `MERGE INTO` without
deletion vectors, and Sail's `MERGE INTO` on a table with `delta.enableDeletionVectors`. Each
result is checked (rows, changed values) on Sail, and the deletion-vector table is read a second
time through delta-rs (`QueryBuilder`, which applies deletion vectors), also after a delta-rs
compaction. The lake does not use deletion vectors: what it would take is printed at the end (and
Sail 0.7.2's deletion-vector MERGE still scans every column of the table to find the rows it marks:
measured at 2M rows of the insurance table's width, it is slower than the lake's own commit).
"""

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from private_lake import private_lake, storage_and_engine  # noqa: E402

#: As wide as the insurance table: its columns' kinds, and the audit columns every curated row carries.
TEXT = ["location_name", "state_code", "region_name", "business_type", "earthquake_coverage", "flood_coverage",
        "_source_file"]
COLUMNS = ["policy_id", "expiry_date", "insured_value", *TEXT, "_source_line", "_applied_at", "_operation", "_sequence"]
#: What using deletion vectors in the lake would take, for the closing lines.
NEEDS = ("the change feed and `VERSION AS OF` read data files themselves (core/formats/delta_files.py) and "
         "would have to apply each file's deletion vector; `DeltaTable.to_pyarrow_table` (delta-rs 1.6.6) refuses "
         "such tables (its QueryBuilder reads them); a SQL MERGE carries no commit label (the run's marker)")


def table_rows(spark, rows: int):
    """`rows` policies, one per key, sequenced at a full load's stamp."""
    from pyspark.sql import functions as F

    return spark.range(1, rows + 1).select(
        F.col("id").alias("policy_id"), F.date_add(F.lit("2026-01-01").cast("date"), (F.col("id") % 365).cast("int"))
        .alias("expiry_date"), (F.col("id") % 997).cast("int").alias("insured_value"),
        *[F.concat(F.lit(f"{name}-"), (F.col("id") % 53).cast("string")).alias(name) for name in TEXT],
        F.col("id").alias("_source_line"), F.lit("2026-01-01 00:00:00").cast("timestamp").alias("_applied_at"),
        F.lit("L").alias("_operation"), F.lit("20260101000000000000000.000000.0001.0000000000").alias("_sequence"))


def batch_rows(spark, rows: int, changes: int):
    """`changes` updates of keys spread evenly over the table, newer than its rows."""
    from pyspark.sql import functions as F

    step = max(1, rows // changes)
    updated = {"insured_value": F.lit(-1), "_operation": F.lit("U"),
               "_sequence": F.lit("20260102000000000000000.000000.0001.0000000000")}
    return table_rows(spark, rows).where(((F.col("policy_id") - 1) % step == 0) & (F.col("policy_id") <= step * changes)) \
        .withColumns(updated)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--changes", type=int, default=1_000)
    args = parser.parse_args()
    with private_lake("deletion-vectors-") as (_home, server):
        from deltalake import DeltaTable, QueryBuilder

        from lake_assets.core.apply import commit as committing
        from lake_assets.core.apply.cluster import clustered
        from lake_assets.core.cdc import merge_sql

        storage, spark = storage_and_engine(server.endpoint)
        options = storage.delta_storage_options()
        uris = {name: storage.uri(f"bench/{name}") for name in ("lake", "merge", "dv")}
        for name, uri in uris.items():
            writer = clustered(table_rows(spark, args.rows), "policy_id", args.rows).write.format("delta")
            if name == "dv":
                writer = writer.option("delta.enableDeletionVectors", "true")
            writer.mode("append").save(uri)
        files = len(DeltaTable(uris["lake"], storage_options=options).file_uris())
        print(f"{args.rows:,} rows in {files} files; {args.changes:,} updates of keys spread over them")

        generated = batch_rows(spark, args.rows, args.changes)  # held as literal rows: the commits are timed, not this
        batch = spark.createDataFrame(generated.collect(), generated.schema)
        batch.createOrReplaceTempView("bench_batch")
        seconds: dict[str, float] = {}
        started = time.perf_counter()
        target = committing.DeltaTarget(uris["lake"], COLUMNS, ["policy_id"], True)
        found = DeltaTable(uris["lake"], storage_options=options)
        plan = committing.choose(spark, target, found, batch, 0, 0)
        committing.commit(spark, target, batch, plan, "bench")
        seconds[f"the lake's commit ({plan.strategy.value}, copy-on-write)"] = time.perf_counter() - started
        newer = "(s._sequence >= t._sequence)"
        for name, label in (("merge", "Sail MERGE INTO, copy-on-write"), ("dv", "Sail MERGE INTO, deletion vectors")):
            started = time.perf_counter()
            spark.sql(merge_sql(f"delta.`{uris[name]}`", "bench_batch", ["policy_id"], COLUMNS, newer=newer)).collect()
            seconds[label] = time.perf_counter() - started

        baseline = next(iter(seconds.values()))
        for label, spent in seconds.items():
            print(f"  {label:<48} {spent:6.2f} s  ({spent / baseline:.2f}x the lake's commit)")
        metrics = DeltaTable(uris["dv"], storage_options=options).history(1)[0].get("operationMetrics", {})
        print(f"  deletion vectors: {metrics.get('numTargetDeletionVectorsAdded')} added, "
              f"{metrics.get('numOutputRows')} rows written (a copy-on-write commit writes every row of the files it touches)")

        problems = []
        for name, uri in uris.items():
            frame = spark.read.format("delta").load(uri)
            counted = (frame.count(), frame.where("insured_value = -1").count())
            if counted != (args.rows, args.changes):
                problems.append(f"{name}: {counted} (rows, changed) on Sail")
        dv_table = DeltaTable(uris["dv"], storage_options=options)

        def second_reader() -> tuple[int, int]:
            found = QueryBuilder().register("t", DeltaTable(uris["dv"], storage_options=options)) \
                .execute("SELECT count(*) AS n, count(CASE WHEN insured_value = -1 THEN 1 END) AS m FROM t").read_all()
            return int(found.column("n")[0].as_py()), int(found.column("m")[0].as_py())

        if second_reader() != (args.rows, args.changes):
            problems.append(f"dv: {second_reader()} (rows, changed) through delta-rs")
        dv_table.optimize.compact()
        if second_reader() != (args.rows, args.changes):
            problems.append(f"dv after delta-rs compaction: {second_reader()} (rows, changed)")
        for problem in problems:
            print("PROBLEM:", problem)
        print("every copy holds the same rows (Sail; the deletion-vector table also through delta-rs, before and "
              "after its compaction)" if not problems else "FAILED")
        print(f"what the lake would need to commit this way: {NEEDS}")
        if problems:
            sys.exit(1)


if __name__ == "__main__":
    main()
