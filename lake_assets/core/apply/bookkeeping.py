"""A table's bookkeeping tables, written on the engine: its tombstones and its quarantine.

- Tombstones (`<table>_tombstones`, Delta): per deleted key, the sequence of its last delete,
  the object and line that deleted it (no line for a snapshot's delete: the key is not in it)
  and when; kept for the table's retention window so that an older change arriving late cannot
  bring the key back. Upserted (a newer delete replaces an older one), so a rerun converges.
- Quarantine (`<table>_quarantine`, Delta, core/quarantine.py's columns): every refused raw row
  with its reason, keyed on (object, ETag, line); inserted only if absent, so a rerun converges.
"""

import datetime as dt

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lake_assets.core.apply.reader import DETAIL, RAW_TEXT, REASON, SEQUENCE, SOURCE_FILE, SOURCE_LINE
from lake_assets.core.formats.delta import add_columns, open_table
from lake_assets.core.instants import timestamp_literal
from lake_assets.core.quarantine import QUARANTINE_NAMES, insert_absent_frame
from lake_assets.core.tables import LakeTable
from lake_assets.resources.storage import LakeStorage

DELETED_AT, LINE = "deleted_at", "source_line"
#: Columns tombstones written by an earlier release lack (name, Spark SQL type): NULL in their rows.
LATER_COLUMNS = [(LINE, "bigint")]


def tombstone_fields(key_types: dict[str, str]) -> list[tuple[str, str]]:
    """The tombstones' columns (name, Spark SQL type): the keys, `_sequence`, `source_file`,
    `source_line`, `deleted_at`."""
    return [*key_types.items(), (SEQUENCE, "STRING"), ("source_file", "STRING"), (LINE, "BIGINT"),
            (DELETED_AT, "TIMESTAMP")]


def tombstone_columns(key_types: dict[str, str]) -> str:
    """The tombstones' columns as Spark DDL."""
    return ", ".join(f"{name} {kind}" for name, kind in tombstone_fields(key_types))


def tombstones(spark: SparkSession, storage: LakeStorage, table: LakeTable) -> DataFrame | None:
    """The table's tombstones (None: it has none), with every column of `tombstone_columns`."""
    if open_table(storage, table) is None:
        return None
    frame = spark.read.format("delta").load(table.uri(storage))
    for name, kind in LATER_COLUMNS:
        if name not in frame.columns:
            frame = frame.withColumn(name, F.lit(None).cast(kind))
    return frame


def record_tombstones(spark: SparkSession, storage: LakeStorage, table: LakeTable, key_types: dict[str, str],
                      deletes: DataFrame, at: dt.datetime) -> None:
    """Upsert `deletes` (the key columns, `_sequence`, `_source_file`, `_source_line`) into the tombstones."""
    keys = list(key_types)
    uri = table.uri(storage)
    found = open_table(storage, table)
    if found is None:
        spark.createDataFrame([], tombstone_columns(key_types)).write.format("delta").mode("append").save(uri)
    else:  # an earlier release's tombstones gain the columns first (one schema change)
        add_columns(found, LATER_COLUMNS)
    rows = deletes.select(*keys, SEQUENCE, F.col(SOURCE_FILE).alias("source_file"),
                          F.col(SOURCE_LINE).cast("bigint").alias(LINE), timestamp_literal(at).alias(DELETED_AT))
    view = "lake_apply_tombstones"
    rows.createOrReplaceTempView(view)
    names = [*keys, SEQUENCE, "source_file", LINE, DELETED_AT]
    on = " AND ".join(f"t.{k} = s.{k}" for k in keys)
    spark.sql(f"MERGE INTO delta.`{uri}` AS t USING {view} AS s ON {on} "
              f"WHEN MATCHED AND s.{SEQUENCE} > t.{SEQUENCE} THEN UPDATE SET "
              + ", ".join(f"t.{c} = s.{c}" for c in names if c not in keys)
              + f" WHEN NOT MATCHED THEN INSERT ({', '.join(names)}) VALUES ({', '.join(f's.{c}' for c in names)})"
              ).collect()


def prune_tombstones(spark: SparkSession, storage: LakeStorage, table: LakeTable, cutoff: dt.datetime) -> None:
    """Forget deletes older than the retention window (one commit, only when some expired)."""
    if open_table(storage, table) is None:
        return
    uri = table.uri(storage)
    expired = F.col(DELETED_AT) < timestamp_literal(cutoff)
    if spark.read.format("delta").load(uri).where(expired).limit(1).count():
        stamp = cutoff.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        spark.sql(f"DELETE FROM delta.`{uri}` WHERE {DELETED_AT} < TIMESTAMP '{stamp}'").collect()


def quarantine(storage: LakeStorage, table: LakeTable, refusals: DataFrame, etags: DataFrame, run_id: str,
               at: dt.datetime) -> None:
    """Insert the reader's refusal rows (with the ETag of the bytes read, from `etags`: `_file`,
    `_etag`) into the quarantine, unless already there from an earlier, failed run."""
    rows = refusals.drop("_etag").join(F.broadcast(etags), "_file").select(
        F.col(SOURCE_FILE).alias("source_file"), F.col("_etag").alias("source_etag"),
        F.col(SOURCE_LINE).alias("line_number"), F.col(REASON).alias("reason"), F.col(DETAIL).alias("detail"),
        F.col(RAW_TEXT).alias("raw_text"), F.lit(run_id).alias("run_id"),
        timestamp_literal(at).alias("quarantined_at"))
    insert_absent_frame(storage, table, rows.select(*QUARANTINE_NAMES))


def release(spark: SparkSession, storage: LakeStorage, table: LakeTable, reason: str,
            files: list[tuple[str, str]]) -> None:
    """Remove the quarantined rows of `files` (key, ETag) refused for `reason`: they are read again."""
    if not files or open_table(storage, table) is None:
        return
    chosen = " OR ".join(f"(source_file = '{_quoted(key)}' AND source_etag = '{_quoted(etag)}')" for key, etag in files)
    spark.sql(f"DELETE FROM delta.`{table.uri(storage)}` WHERE reason = '{reason}' AND ({chosen})").collect()


def _quoted(value: str) -> str:
    return value.replace("'", "''")
