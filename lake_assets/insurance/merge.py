"""Apply a run's resolved changes to the curated Delta table through the Spark engine.

The batch (one row per key: an upsert or a delete, with its `_sequence`; a full load's
rows and the deletes it implies arrive the same way) is staged as Parquet in the bucket,
sorted by key, then the engine commits it in ONE Delta commit, by one of the
`Strategy`s below. Either way a key takes a change only if the change's sequence is at
least the row's (`SEQUENCE BY`; equal re-applies, so a rerun converges), and a failure
leaves the table at its last version. Only DataFrame and Spark SQL calls are used (plus
the standard writer options `replaceWhere`, `targetFileSize` and `maxRecordsPerFile`), so Sail
and JVM Spark run the same code.

The table is kept clustered by `policy_id`: every write sorts by key (the staged batch is
sorted and split so each of the engine's scan partitions is one contiguous key range,
`stage_sorted`; rewritten rows are sorted within each writer partition), into files of
about `TARGET_FILE_BYTES`; the nightly compaction restores a total order
(jobs/maintenance.py). So each file holds a narrow key range, and the Delta log's
per-file min/max of `policy_id` says which files a batch can touch (`key_ranges`,
core/formats/delta.py).

Why a narrow batch is a `replaceWhere` over key ranges and not a MERGE (measured with
Sail 0.7.2 on 2 cores, 2M-row table in 32 clustered files, 1,000 changed keys in one file):
- `MERGE INTO ... ON t.k = s.k`: 3.8 s. Sail rewrites only the touched file (targeted
  rewrite) but joins the source with a scan of the WHOLE target to find it, so the cost
  follows the table. Narrowing the ON clause (`AND t.k BETWEEN lo AND hi` or
  `AND t.k IN (...)`) did not prune the scan (4.2 s).
- `replaceWhere "k BETWEEN lo AND hi"` with the new rows of that range: 0.10 s. Sail
  selects the files to replace from the log's statistics, keeps their rows outside the
  predicate, and commits removes + adds in one WRITE commit (dataChange=true).
- `replaceWhere "k IN (...1,000 keys...)"`: 12 s (no pruning; slow per-row evaluation), so
  the predicate is a few ranges, never a key list.
The ranges are the key ranges of the files holding the batch's keys (plus the keys no
file holds, e.g. new policies), merged, at most `MAX_RANGES` of them (core/formats/delta.py).

When those files hold `REWRITE_FRACTION` of the table or more (a wide batch, or keys
spread over every file), the whole table is rewritten instead: the same plan without a
predicate.
"""

import io
import os
from enum import StrEnum

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lake_assets.insurance.contract import KEY, table_columns, table_schema
from lake_assets.resources.storage import LakeStorage



def _data_and_audit() -> list[str]:
    """The table's columns, in order (the newest contract's: see contract.table_columns)."""
    return [c.name for c in table_columns()]

#: Size of the files the engine writes (a hint to its writer): ~300k policy rows. Small
#: enough that a narrow batch rewrites little, large enough that a 10M-row table is a few
#: dozen files (the log and every scan stay cheap).
TARGET_FILE_BYTES = 4 << 20
#: The same size in rows, for delta-spark, which ignores `targetFileSize` (a 1M-row table was 2
#: files there, and a 10k-row batch rewrote the whole table instead of a narrow commit).
TARGET_FILE_ROWS = 300_000
#: A batch whose files hold at least this share of the table's rows rewrites the table.
REWRITE_FRACTION = 0.5


class Strategy(StrEnum):
    """How one run's changes are committed to the table."""

    CREATE = "create"  # the table's first commit
    NARROW = "narrow"  # replaceWhere over the key ranges of the files the batch touches
    REWRITE = "rewrite"  # overwrite the whole table


def stage(storage: LakeStorage, key: str, rows: pa.Table, row_group_size: int = 1 << 20) -> str:
    """Write `rows` as Parquet to `key` in the bucket; return its s3:// URI.

    The staged batch is read once, by the engine, and then deleted: it is written for
    speed (snappy, which writes twice as fast as zstd here; dictionaries only for columns
    of few distinct values; no statistics), not for size. Columns may be dictionary-typed.
    """
    buffer = io.BytesIO()
    few_values = [name for name in rows.column_names if name in FEW_VALUES]
    # Without the Arrow schema in the file, a dictionary column (`_source_file`) reads back as
    # the plain strings it stands for (the engine has no dictionary type).
    pq.write_table(rows, buffer, compression="snappy", use_dictionary=few_values, write_statistics=False,
                   row_group_size=row_group_size, store_schema=False)
    buffer.seek(0)
    storage.put_bytes(key, buffer)  # the buffer itself, not a copy of it
    return storage.uri(key)


#: Columns with few distinct values (dictionary-encoded when staged, and in the history's files).
FEW_VALUES = {"location_name", "state_code", "region_name", "business_type", "earthquake_coverage",
              "flood_coverage", "_operation", "_source_file"}


#: Parallelism of the engine's scans and writes (Sail: one partition per core).
ENGINE_PARTITIONS = os.cpu_count() or 1
#: Fewest rows per staged object (a small batch is one object).
PART_MIN_ROWS = 100_000


def stage_sorted(storage: LakeStorage, prefix: str, rows: pa.Table) -> str:
    """Stage `rows` sorted by key under `prefix`, in up to ENGINE_PARTITIONS objects of
    consecutive keys, each ONE row group; return the prefix's s3:// URI.

    The engine reads one object per partition and writes each partition's rows to its own
    files, so files written from it hold narrow, disjoint key ranges. (Measured: when there
    are more row groups than partitions — one object of several row groups, or more objects
    than partitions — Sail's partitions interleave row groups and files span wide ranges.)
    """
    keys = rows[KEY].to_numpy()
    if len(keys) > 1 and not bool(np.all(keys[1:] >= keys[:-1])):
        rows = rows.sort_by(KEY)
    parts = max(1, min(ENGINE_PARTITIONS, rows.num_rows // PART_MIN_ROWS))
    size = -(-rows.num_rows // parts) if rows.num_rows else 0
    for part in range(parts):
        stage(storage, f"{prefix}part-{part:05d}.parquet", rows.slice(part * size, size), max(size, 1))
    return storage.uri(prefix)


def create_from(spark: SparkSession, table_uri: str, staged_uri: str, label: str | None = None) -> None:
    """The first commit of the table: the staged upserts (deletes meet no row). `label` is
    the lake's name for the commit, kept in its commitInfo (`userMetadata`; `lake history` shows it)."""
    rows = spark.read.parquet(staged_uri).where(F.col("_operation") != "D").select(*_data_and_audit())
    _labelled(_sized(rows.write.format("delta").mode("append")), label).save(table_uri)


# --- which files a batch touches -------------------------------------------------------------

def rows_within(ranges: list[tuple[int, int]], mins: np.ndarray, maxs: np.ndarray, rows: np.ndarray) -> int:
    """Rows of the files whose key range meets one of `ranges` (the rows a replace rewrites)."""
    if not ranges:
        return 0
    lows, highs = np.array([r[0] for r in ranges]), np.array([r[1] for r in ranges])
    meets = np.searchsorted(lows, maxs, "right") > np.searchsorted(highs, mins, "left")
    return int(rows[meets].sum())


_INT = np.iinfo(np.int32)  # the key is an INT: an unbounded range stops at its limits


def predicate(ranges: list[tuple[int, int]]) -> str:
    """The ranges as a Spark SQL predicate on the key."""
    return " OR ".join(f"({KEY} BETWEEN {max(low, _INT.min)} AND {min(high, _INT.max)})" for low, high in ranges)


def choose(touched_rows: int, table_rows: int, table_exists: bool = True) -> Strategy:
    if not table_exists:
        return Strategy.CREATE
    return Strategy.REWRITE if touched_rows >= REWRITE_FRACTION * table_rows else Strategy.NARROW


# --- committing ------------------------------------------------------------------------------

#: A change is newer than the row it meets (a row without a sequence is older than any).
def _newer() -> F.Column:
    return F.col("_row_sequence").isNull() | (F.col("_sequence") >= F.col("_row_sequence"))


def replace_changes(spark: SparkSession, table_uri: str, staged_uri: str, ranges: list[tuple[int, int]],
                    label: str | None = None) -> None:
    """Commit the changes by replacing only the rows within `ranges` (`replaceWhere`):
    the files holding them are rewritten, every other file is left as it is."""
    _overwrite(spark, table_uri, staged_uri, predicate(ranges), label)


def rewrite_changes(spark: SparkSession, table_uri: str, staged_uri: str, label: str | None = None) -> None:
    """Commit the changes by rewriting the whole table."""
    _overwrite(spark, table_uri, staged_uri, None, label)


def _sized(writer):
    """The writer, with files of about `TARGET_FILE_BYTES` (Sail) or `TARGET_FILE_ROWS` rows (delta-spark)."""
    return writer.option("targetFileSize", TARGET_FILE_BYTES).option("maxRecordsPerFile", TARGET_FILE_ROWS)


def _labelled(writer, label: str | None):
    """The writer, recording `label` in the commit's `userMetadata` (Delta's writer option,
    honoured by Sail and delta-spark)."""
    return writer.option("userMetadata", label) if label else writer


def _overwrite(spark: SparkSession, table_uri: str, staged_uri: str, where: str | None, label: str | None) -> None:
    """One overwrite of the rows `where` selects (all when None): (rows no newer change
    reaches) UNION ALL (newer upserts), sorted by key within each writer partition. One
    pass: the row counts of the commit are the pipeline's (it read the same version)."""
    current = spark.read.format("delta").load(table_uri)
    if where is not None:
        current = current.where(where)
    keys = current.select(KEY, F.col("_sequence").alias("_row_sequence"))
    batch = spark.read.parquet(staged_uri).join(keys, on=KEY, how="left").where(_newer()).drop("_row_sequence")
    kept = current.join(batch.select(KEY), on=KEY, how="left_anti").select(*_data_and_audit())
    upserts = batch.filter(F.col("_operation") != "D").select(*_data_and_audit())
    writer = _sized(kept.unionByName(upserts).sortWithinPartitions(KEY).write.format("delta").mode("overwrite"))
    if where is not None:
        writer = writer.option("replaceWhere", where)
    _labelled(writer, label).save(table_uri)


def conform(rows: pa.Table) -> pa.Table:
    """The staged batch in the table's column order and types."""
    schema = table_schema()
    return rows.select(schema.names).cast(schema)
