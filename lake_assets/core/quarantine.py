"""The quarantine tables: every raw row a domain could not apply, with why and where it came from.

Every domain's quarantine is a Delta table with the same columns (`QUARANTINE_COLUMNS`),
keyed on (source_file, source_etag, line_number). Rows are inserted only if absent, so a
run that failed after quarantining and is re-run converges instead of duplicating them
(`insert_absent_frame`: one MERGE on the engine; the rows never reach the Dagster process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from lake_assets.core.formats.delta import open_table
from lake_assets.core.tables import LakeTable
from lake_assets.resources.storage import LakeStorage

if TYPE_CHECKING:  # the engine's frames are only handed in; reading the schema columns needs no PySpark
    from pyspark.sql import DataFrame

#: (name, Arrow type, Spark SQL type) of every quarantine table's columns, in order.
QUARANTINE_COLUMNS: list[tuple[str, pa.DataType, str]] = [
    ("source_file", pa.string(), "STRING"),
    ("source_etag", pa.string(), "STRING"),
    ("line_number", pa.int64(), "BIGINT"),
    ("reason", pa.string(), "STRING"),
    ("detail", pa.string(), "STRING"),
    ("raw_text", pa.string(), "STRING"),
    ("run_id", pa.string(), "STRING"),
    ("quarantined_at", pa.timestamp("us", tz="UTC"), "TIMESTAMP"),
]
QUARANTINE_SCHEMA = pa.schema([(name, arrow_type) for name, arrow_type, _ in QUARANTINE_COLUMNS])
QUARANTINE_NAMES = [name for name, _, _ in QUARANTINE_COLUMNS]
#: A quarantined row is identified by where it came from.
QUARANTINE_KEY = ("source_file", "source_etag", "line_number")


def insert_absent_frame(storage: LakeStorage, table: LakeTable, rows: DataFrame) -> None:
    """Insert the engine's `rows` (QUARANTINE_NAMES columns) not in `table` yet, with one MERGE."""
    spark = rows.sparkSession
    uri = table.uri(storage)
    if open_table(storage, table) is None:
        empty = ", ".join(f"{name} {sql_type}" for name, _, sql_type in QUARANTINE_COLUMNS)
        spark.createDataFrame([], empty).write.format("delta").mode("append").save(uri)
    view = "lake_quarantine_batch"
    rows.select(*QUARANTINE_NAMES).createOrReplaceTempView(view)
    on = " AND ".join(f"t.{c} = s.{c}" for c in QUARANTINE_KEY)
    columns = ", ".join(QUARANTINE_NAMES)
    values = ", ".join(f"s.{c}" for c in QUARANTINE_NAMES)
    spark.sql(f"MERGE INTO delta.`{uri}` AS t USING {view} AS s ON {on} "
              f"WHEN NOT MATCHED THEN INSERT ({columns}) VALUES ({values})").collect()
