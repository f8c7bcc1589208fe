"""Apply a run's resolved changes to the curated Delta table through the Spark engine.

The batch (one row per key: an upsert or a delete, with its `_sequence`; a full load's
rows and the deletes it implies arrive the same way) is staged as one Parquet object in
the bucket, then the engine applies it: with one `MERGE INTO`, or — when the batch touches
a large share of the table, so a MERGE would rewrite nearly every file anyway — with one
rewrite of the table. Either way a key takes a change only if the change's sequence is at
least the row's (`SEQUENCE BY`; equal re-applies, so a rerun converges). Every path is a
single Delta commit: a failure leaves the table at its last version.
Only DataFrame and Spark SQL calls are used, so Sail and JVM Spark run the same code.
"""

import io

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lake_assets.core.cdc import merge_sql
from lake_assets.insurance.contract import KEY, table_columns, table_schema
from lake_assets.resources.storage import LakeStorage



def _data_and_audit() -> list[str]:
    return [c.name for c in table_columns()]


def stage(storage: LakeStorage, key: str, rows: pa.Table) -> str:
    """Write `rows` as Parquet to `key` in the bucket; return its s3:// URI.

    The staged batch is read once, by the engine, and then deleted: it is written for
    speed (snappy, which writes twice as fast as zstd here; dictionaries only for columns
    of few distinct values; no statistics), not for size. Columns may be dictionary-typed.
    """
    buffer = io.BytesIO()
    few_values = [name for name in rows.column_names if name in _FEW_VALUES]
    # Without the Arrow schema in the file, a dictionary column (`_source_file`) reads back as
    # the plain strings it stands for (the engine has no dictionary type).
    pq.write_table(rows, buffer, compression="snappy", use_dictionary=few_values, write_statistics=False,
                   row_group_size=1 << 20, store_schema=False)
    buffer.seek(0)
    storage.put_bytes(key, buffer)  # the buffer itself, not a copy of it
    return storage.uri(key)


#: Columns with few distinct values (dictionary-encoded when staged).
_FEW_VALUES = {"location_name", "state_code", "region_name", "business_type", "earthquake_coverage",
               "flood_coverage", "_operation", "_source_file"}


def create_from(spark: SparkSession, table_uri: str, staged_uri: str) -> None:
    """The first commit of the table: the staged upserts (deletes meet no row)."""
    rows = spark.read.parquet(staged_uri).where(F.col("_operation") != "D").select(*_data_and_audit())
    rows.write.format("delta").mode("append").save(table_uri)


#: A change is newer than the row it meets (a row without a sequence is older than any).
NEWER = "s._sequence >= coalesce(t._sequence, '')"


def merge_changes(spark: SparkSession, table_uri: str, staged_uri: str) -> None:
    """One MERGE of the staged changes (one row per key, `_operation` I/U/L/D)."""
    view = "lake_cdc_batch"
    spark.read.parquet(staged_uri).createOrReplaceTempView(view)
    spark.sql(merge_sql(f"delta.`{table_uri}`", view, [KEY], _data_and_audit(), newer=NEWER)).collect()


#: A CDC batch of at least REWRITE_MIN_ROWS rows and REWRITE_FRACTION of the table's rows
#: is applied by rewriting the table instead of a MERGE.
REWRITE_FRACTION = 0.05
REWRITE_MIN_ROWS = 50_000


def prefers_rewrite(batch_rows: int, table_rows: int) -> bool:
    return batch_rows >= max(REWRITE_MIN_ROWS, REWRITE_FRACTION * table_rows)


def rewrite_changes(spark: SparkSession, table_uri: str, staged_uri: str) -> dict[str, int]:
    """The changes as one overwrite: (rows no newer change reaches) UNION ALL (newer upserts).

    The same result as `merge_changes`. Returns the MERGE's metrics (inserted, updated,
    deleted), counted by a key join of the batch against the table before the write.
    """
    current = spark.read.format("delta").load(table_uri)
    keys = current.select(KEY, F.col("_sequence").alias("_row_sequence")).withColumn("_in_table", F.lit(True))
    joined = spark.read.parquet(staged_uri).join(keys, on=KEY, how="left")
    newer = F.col("_row_sequence").isNull() | (F.col("_sequence") >= F.col("_row_sequence"))
    batch = joined.where(F.col("_in_table").isNull() | newer).drop("_row_sequence")
    upsert, present = F.col("_operation") != "D", F.col("_in_table").isNotNull()
    counts = batch.agg(
        F.sum(F.when(upsert & ~present, 1).otherwise(0)).alias("inserted"),
        F.sum(F.when(upsert & present, 1).otherwise(0)).alias("updated"),
        F.sum(F.when(~upsert & present, 1).otherwise(0)).alias("deleted"),
    ).collect()[0]
    kept = current.join(batch.select(KEY), on=KEY, how="left_anti").select(*_data_and_audit())
    upserts = batch.filter(upsert).select(*_data_and_audit())
    kept.unionByName(upserts).write.format("delta").mode("overwrite").save(table_uri)
    return {"numTargetRowsInserted": int(counts["inserted"] or 0), "numTargetRowsUpdated": int(counts["updated"] or 0),
            "numTargetRowsDeleted": int(counts["deleted"] or 0)}


def conform(rows: pa.Table) -> pa.Table:
    """The staged batch in the table's column order and types."""
    schema = table_schema()
    return rows.select(schema.names).cast(schema)
