"""Apply a validated batch to the curated Delta table through the Spark engine.

The batch is staged as one Parquet object in the bucket, then the engine either replaces
the table's contents with it (full load) or runs one `MERGE INTO` (CDC: upserts and
deletes). Both are single Delta commits: a failure leaves the table at its last version.
Only DataFrame and Spark SQL calls are used, so Sail and JVM Spark run the same code.
"""

import io

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

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
    assignments = ", ".join(f"t.{c} = s.{c}" for c in _DATA_AND_AUDIT if c != KEY)
    columns = ", ".join(_DATA_AND_AUDIT)
    values = ", ".join(f"s.{c}" for c in _DATA_AND_AUDIT)
    spark.sql(f"""
        MERGE INTO delta.`{table_uri}` AS t
        USING {view} AS s
        ON t.{KEY} = s.{KEY}
        WHEN MATCHED AND s._operation = 'D' THEN DELETE
        WHEN MATCHED THEN UPDATE SET {assignments}
        WHEN NOT MATCHED AND s._operation <> 'D' THEN INSERT ({columns}) VALUES ({values})
    """).collect()


def conform(rows: pa.Table) -> pa.Table:
    """The staged batch in the table's column order and types."""
    return rows.select(TABLE_SCHEMA.names).cast(TABLE_SCHEMA)
