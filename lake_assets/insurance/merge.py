"""Apply a validated batch to the curated Delta table through the Spark engine.

The batch is staged as one Parquet object in the bucket, then the engine either replaces
the table's contents with it (full load) or applies the CDC upserts and deletes: with one
`MERGE INTO`, or — when the batch touches a large share of the table, so a MERGE would
rewrite nearly every file anyway — with one rewrite of the table (the current rows whose
key is not in the batch, plus the batch's upserts). Every path is a single Delta commit: a
failure leaves the table at its last version.
Only DataFrame and Spark SQL calls are used, so Sail and JVM Spark run the same code.
"""

import io

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lake_assets.core.cdc import merge_sql
from lake_assets.insurance.contract import KEY, TABLE_COLUMNS, TABLE_SCHEMA
from lake_assets.resources.storage import LakeStorage

_DATA_AND_AUDIT = [name for name, _, _ in TABLE_COLUMNS]


def stage(storage: LakeStorage, key: str, rows: pa.Table) -> str:
    """Write `rows` as Parquet to `key` in the bucket; return its s3:// URI."""
    buffer = io.BytesIO()
    pq.write_table(rows, buffer, compression="zstd", row_group_size=1 << 20)
    storage.put_bytes(key, buffer.getvalue())
    return storage.uri(key)


def create_empty(spark: SparkSession, table_uri: str) -> None:
    ddl = ", ".join(f"{name} {sql_type}" for name, _, sql_type in TABLE_COLUMNS)
    spark.createDataFrame([], ddl).write.format("delta").mode("append").save(table_uri)


def replace_contents(spark: SparkSession, table_uri: str, staged_uri: str) -> None:
    """Full load: the staged snapshot becomes the table's next version."""
    snapshot = spark.read.parquet(staged_uri).select(*_DATA_AND_AUDIT)
    snapshot.write.format("delta").mode("overwrite").save(table_uri)


def merge_changes(spark: SparkSession, table_uri: str, staged_uri: str) -> None:
    """CDC: one MERGE of the staged changes (one row per key, `_operation` I/U/D)."""
    view = "lake_cdc_batch"
    spark.read.parquet(staged_uri).createOrReplaceTempView(view)
    spark.sql(merge_sql(f"delta.`{table_uri}`", view, [KEY], _DATA_AND_AUDIT)).collect()


#: A CDC batch of at least REWRITE_MIN_ROWS rows and REWRITE_FRACTION of the table's rows
#: is applied by rewriting the table instead of a MERGE.
REWRITE_FRACTION = 0.05
REWRITE_MIN_ROWS = 50_000


def prefers_rewrite(batch_rows: int, table_rows: int) -> bool:
    return batch_rows >= max(REWRITE_MIN_ROWS, REWRITE_FRACTION * table_rows)


def rewrite_changes(spark: SparkSession, table_uri: str, staged_uri: str) -> dict[str, int]:
    """CDC as one overwrite: (rows whose key is not in the batch) UNION ALL (batch upserts).

    The same result as `merge_changes`. Returns the MERGE's metrics (inserted, updated,
    deleted), counted by a key join of the batch against the table before the write.
    """
    batch = spark.read.parquet(staged_uri)
    current = spark.read.format("delta").load(table_uri)
    keys = current.select(KEY).withColumn("_in_table", F.lit(True))
    joined = batch.select(KEY, "_operation").join(keys, on=KEY, how="left")
    upsert, present = F.col("_operation") != "D", F.col("_in_table").isNotNull()
    counts = joined.agg(
        F.sum(F.when(upsert & ~present, 1).otherwise(0)).alias("inserted"),
        F.sum(F.when(upsert & present, 1).otherwise(0)).alias("updated"),
        F.sum(F.when(~upsert & present, 1).otherwise(0)).alias("deleted"),
    ).collect()[0]
    kept = current.join(batch.select(KEY), on=KEY, how="left_anti").select(*_DATA_AND_AUDIT)
    upserts = batch.filter(upsert).select(*_DATA_AND_AUDIT)
    kept.unionByName(upserts).write.format("delta").mode("overwrite").save(table_uri)
    return {"numTargetRowsInserted": int(counts["inserted"] or 0), "numTargetRowsUpdated": int(counts["updated"] or 0),
            "numTargetRowsDeleted": int(counts["deleted"] or 0)}


def conform(rows: pa.Table) -> pa.Table:
    """The staged batch in the table's column order and types."""
    return rows.select(TABLE_SCHEMA.names).cast(TABLE_SCHEMA)
