"""Commit a run's resolved changes to a Delta table, on the engine, in ONE commit.

The batch holds one row per key (an upsert or a delete, with its `_sequence`). A key takes a
change only if the change is at least as new as its row (`SEQUENCE BY`; equal re-applies, so
a rerun converges), and a failure leaves the table at its last version. Only DataFrame and
Spark SQL calls are used (plus the standard writer options `replaceWhere`, `targetFileSize`,
`maxRecordsPerFile` and `userMetadata`), so Sail and JVM Spark run the same code.

Strategies (`Strategy`):
- `create`: the table's first commit, the batch's upserts.
- `narrow`: a `replaceWhere` over the key ranges of the files holding the batch's keys (plus
  the ranges of new keys), for a table whose first key is an integer: the files holding them
  are rewritten, every other file is left as it is. Measured with Sail 0.7.2 on 2 cores (2M
  rows in 32 clustered files, 1,000 changed keys): 0.10 s, against 3.8 s for a `MERGE INTO`
  (Sail joins the source with a scan of the whole target), and 12 s for a `replaceWhere` on a
  key list (no pruning). The ranges are found on the engine (`touched_ranges`): the
  orchestrator knows only the files' key ranges from the log, never the batch's keys.
- `rewrite`: when those files hold `REWRITE_FRACTION` of the table or more, the whole table is
  rewritten (the same plan without a predicate).
- `merge`: a table keyed otherwise (a string or composite key): one `MERGE INTO`.
- `repartition`: the declaration's `partition_by` is not the table's (it was added, changed or
  dropped since the table was created): the whole table is rewritten with the declared
  partitioning, in one commit (`overwriteSchema`), with the batch applied.

The table is kept clustered by its first key (every write cuts its rows into files of disjoint
key ranges of about `cluster.TARGET_FILE_ROWS` rows; the nightly compaction keeps it so), so each
file holds a narrow key range and a small batch touches few files.
"""

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lake_assets.core.apply.cluster import clustered, file_cuts, files_meeting, laid_out
from lake_assets.core.apply.resolve import DELETE
from lake_assets.core.apply.reader import SEQUENCE
from lake_assets.core.apply.validate import OPERATION
from lake_assets.core.cdc import merge_sql
from lake_assets.core.formats.delta import MAX_RANGES, file_ranges, row_count
from deltalake import DeltaTable

#: A batch whose files hold at least this share of the table's rows rewrites the table.
REWRITE_FRACTION = 0.5


class Strategy(StrEnum):
    CREATE = "create"
    NARROW = "narrow"
    REWRITE = "rewrite"
    MERGE = "merge"
    REPARTITION = "repartition"


@dataclass(frozen=True)
class DeltaTarget:
    """The Delta table a batch is committed to: where, its columns in order, its keys."""

    uri: str
    columns: list[str]
    keys: list[str]
    integer_key: bool  # the first key is an integer: narrow replaces by key ranges
    key_type: str = "bigint"  # the first key's Spark SQL type (its range bounds a predicate)
    partition_by: tuple[str, ...] = ()  # the table's partition columns (a folder per value)


@dataclass(frozen=True)
class CommitPlan:
    """How a batch is committed: the strategy, the rows a narrow replace selects, and about how
    many rows the commit writes (its files are cut to `TARGET_FILE_ROWS`)."""

    strategy: Strategy
    where: str | None = None
    rows: int = 0
    cuts: tuple[int, ...] = ()  # where the files it replaces began: the rewrite keeps their ranges

    @property
    def name(self) -> str:
        return self.strategy.value


def choose(spark: SparkSession, target: DeltaTarget, found: DeltaTable | None, batch: DataFrame,
           inserted: int, deleted: int) -> CommitPlan:
    """The strategy for committing `batch` (`inserted` new keys, `deleted` present ones) to the
    table `found` (None: it does not exist yet)."""
    if found is None:
        return CommitPlan(Strategy.CREATE, rows=inserted)
    if found.metadata().partition_columns != list(target.partition_by):
        return CommitPlan(Strategy.REPARTITION, rows=row_count(found) + inserted - deleted)
    if not target.integer_key:
        return CommitPlan(Strategy.MERGE)
    mins, maxs, rows = file_ranges(found, target.keys[0])
    ranges = touched_ranges(spark, batch.select(target.keys[0]), mins, maxs)
    touched = rows_within(ranges, mins, maxs, rows)
    if touched >= REWRITE_FRACTION * int(rows.sum()):
        return CommitPlan(Strategy.REWRITE, rows=int(rows.sum()) + inserted - deleted,
                          cuts=tuple(file_cuts(mins, maxs)))
    return CommitPlan(Strategy.NARROW, predicate(target.keys[0], ranges, target.key_type), touched + inserted - deleted,
                      tuple(file_cuts(mins, maxs, ranges)))


def commit(spark: SparkSession, target: DeltaTarget, batch: DataFrame, plan: CommitPlan, label: str) -> None:
    """Commit `batch` (the table's columns and `_operation`) in one Delta commit labelled `label`
    (its commitInfo's `userMetadata`)."""
    if plan.strategy is Strategy.CREATE:
        rows = batch.where(F.col(OPERATION) != DELETE).select(*target.columns)
        writer = clustered(rows, target.keys[0], plan.rows).write.format("delta").mode("append")
        _labelled(writer.partitionBy(*target.partition_by) if target.partition_by else writer, label).save(target.uri)
    elif plan.strategy is Strategy.MERGE:
        _merge(spark, target, batch)
    else:
        _overwrite(spark, target, batch, plan, label)


# --- which key ranges a batch touches ------------------------------------------------------------

def touched_ranges(spark: SparkSession, keys: DataFrame, mins: np.ndarray, maxs: np.ndarray,
                   max_ranges: int = MAX_RANGES) -> list[tuple[int, int]]:
    """Closed key ranges covering every key of `keys` (one integer column) and the whole of every
    file that may hold one (`mins`/`maxs`: the files' key statistics from the log).

    Found on the engine, with two joins of the batch's keys against small frames: the files whose
    range holds a key (their ids come back), and the gaps between files (a new key's range is the
    least and greatest new key of its gap: their bounds come back). Overlapping and adjacent
    ranges are merged, then the narrowest gaps between them until at most `max_ranges` remain.
    """
    key = keys.columns[0]
    distinct = keys.select(F.col(key).cast("bigint").alias("_k")).distinct()
    lows: list[int] = []
    highs: list[int] = []
    if len(mins):
        files = spark.createDataFrame([(i, int(lo), int(hi)) for i, (lo, hi) in enumerate(zip(mins, maxs))],
                                      "_f INT, _lo BIGINT, _hi BIGINT")
        hit = distinct.join(F.broadcast(files), (F.col("_k") >= F.col("_lo")) & (F.col("_k") <= F.col("_hi")))
        for row in hit.select("_f").distinct().collect():
            lows.append(int(mins[row["_f"]]))
            highs.append(int(maxs[row["_f"]]))
    gaps = _gaps(mins, maxs)
    bounds = spark.createDataFrame(gaps, "_g INT, _lo BIGINT, _hi BIGINT")
    within = distinct.join(F.broadcast(bounds), (F.col("_k") >= F.col("_lo")) & (F.col("_k") <= F.col("_hi")))
    for row in within.groupBy("_g").agg(F.min("_k").alias("lo"), F.max("_k").alias("hi")).collect():
        lows.append(int(row["lo"]))
        highs.append(int(row["hi"]))
    return merge_ranges(lows, highs, max_ranges)


def _gaps(mins: np.ndarray, maxs: np.ndarray) -> list[tuple[int, int, int]]:
    """(id, low, high) of the key ranges no file covers (the whole int64 line when there is no file)."""
    info = np.iinfo(np.int64)
    covered = merge_ranges([int(v) for v in mins], [int(v) for v in maxs], len(mins) + 1)
    gaps: list[tuple[int, int, int]] = []
    start: int | None = int(info.min)
    for low, high in covered:
        if start is not None and low > start:
            gaps.append((len(gaps), start, low - 1))
        start = high + 1 if high < info.max else None
    if start is not None:
        gaps.append((len(gaps), start, int(info.max)))
    return gaps


def merge_ranges(lows: list[int], highs: list[int], max_ranges: int) -> list[tuple[int, int]]:
    """Closed ranges merged where they overlap or touch, then across the narrowest gaps until at
    most `max_ranges` remain (correct, only wider)."""
    if not lows:
        return []
    order = np.argsort(np.array(lows, np.int64), kind="stable")
    low_arr = np.array(lows, np.int64)[order]
    high_arr = np.array(highs, np.int64)[order]
    reach = np.maximum.accumulate(high_arr)
    starts = np.concatenate([[True], low_arr[1:] > reach[:-1] + 1])
    first = np.flatnonzero(starts)
    merged_lows, merged_highs = low_arr[first], np.maximum.reduceat(high_arr, first)
    if len(first) > max_ranges:  # keep the widest gaps as boundaries
        gaps = merged_lows[1:] - merged_highs[:-1]
        cut = np.sort(np.argsort(gaps, kind="stable")[len(gaps) - (max_ranges - 1):])
        merged_lows = np.concatenate([merged_lows[:1], merged_lows[cut + 1]])
        merged_highs = np.concatenate([merged_highs[cut], merged_highs[-1:]])
    return [(int(low), int(high)) for low, high in zip(merged_lows, merged_highs)]


def rows_within(ranges: list[tuple[int, int]], mins: np.ndarray, maxs: np.ndarray, rows: np.ndarray) -> int:
    """Rows of the files whose key range meets one of `ranges` (the rows a replace rewrites)."""
    return int(rows[files_meeting(ranges, mins, maxs)].sum())


_BOUNDS = {"int": (-(2**31), 2**31 - 1), "bigint": (-(2**63) + 1, 2**63 - 1)}


def predicate(key: str, ranges: list[tuple[int, int]], key_type: str = "bigint") -> str:
    """The ranges as a Spark SQL predicate on the key (an unbounded range stops at the type's limits)."""
    low_limit, high_limit = _BOUNDS[key_type]
    return " OR ".join(f"({key} BETWEEN {max(low, low_limit)} AND {min(high, high_limit)})" for low, high in ranges)


# --- committing --------------------------------------------------------------------------------

def _labelled(writer, text: str):
    return writer.option("userMetadata", text) if text else writer


def _overwrite(spark: SparkSession, target: DeltaTarget, batch: DataFrame, plan: CommitPlan, text: str) -> None:
    """One overwrite of the rows the plan's predicate selects (all when None): (rows no newer
    change reaches) UNION ALL (newer upserts), in files of disjoint key ranges (cluster.py); a
    repartition writes them with the declared partition columns."""
    where = plan.where
    current = spark.read.format("delta").load(target.uri)
    if where is not None:
        current = current.where(where)
    rows = current.select(*target.keys, F.col(SEQUENCE).alias("_row_sequence"))
    newer = F.col("_row_sequence").isNull() | (F.col(SEQUENCE) >= F.col("_row_sequence"))
    changes = batch.join(rows, target.keys, "left").where(newer).drop("_row_sequence")
    kept = current.join(changes.select(*target.keys), target.keys, "left_anti").select(*target.columns)
    upserts = changes.where(F.col(OPERATION) != DELETE).select(*target.columns)
    writer = laid_out(kept.unionByName(upserts), target.keys, target.integer_key, plan.rows, plan.cuts) \
        .write.format("delta").mode("overwrite")
    if where is not None:
        writer = writer.option("replaceWhere", where)
    if plan.strategy is Strategy.REPARTITION:
        writer = (writer.partitionBy(*target.partition_by) if target.partition_by else writer) \
            .option("overwriteSchema", "true")
    _labelled(writer, text).save(target.uri)


def _merge(spark: SparkSession, target: DeltaTarget, batch: DataFrame) -> None:
    """One `MERGE INTO` guarded by the sequence (its commit carries no label: SQL sets none)."""
    view = "lake_apply_batch"
    batch.select(*target.columns).createOrReplaceTempView(view)
    newer = f"(t.{SEQUENCE} IS NULL OR s.{SEQUENCE} >= t.{SEQUENCE})"
    spark.sql(merge_sql(f"delta.`{target.uri}`", view, target.keys, target.columns, newer=newer)).collect()
