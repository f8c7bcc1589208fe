"""Apply sequenced changes to `tpcds.web_sales`, in the engine: one rule for day objects and corrections.

A key takes a change only if it is at least as new as its row (`_sequence`; a row without
one is older than any change; a change from the object that wrote the row, loaded again,
always re-applies: only the object part of two sequences is compared then, as rows loaded
before day objects' rows shared one sequence carry their line number) and its tombstone
(the sequence of its last delete, `tpcds_tombstones`), as `APPLY CHANGES ... SEQUENCE BY`
does. Within a run the newest change per key is the candidate (a window ranks them only
when the caller could not rule out a key with several changes); the others are superseded
(counted, not lost). A day
object is a snapshot of its day as of its floor (the base of its sequence): its rows are
upserts, and the day's keys in the table older than the floor that it does not hold are
deleted (`implied` deletes, tombstoned at the floor so re-loading an older object of that
day cannot bring them back).

The resolved changes (one row per key: its operation, its full row and its sequence) are
staged once as Parquet; then, in an order that makes a rerun converge: tombstones (upserts
keeping the newest delete), the table (one commit; equal sequences re-apply), and the
caller's ledger entries last. The commit is ONE `MERGE INTO` guarded by the sequence; the
table is merge-on-read (`load.MERGE_ON_READ`), so the MERGE writes a position delete per
replaced row and appends the upserts: a 1 % correction batch, spread over every partition,
writes what it changes and no data file is rewritten. Changes numbering a quarter of the
table's rows or more (a re-load of most days) overwrite the whole table once instead (its
rows less the changed keys, plus the upserts), which also folds in every delete file: a
MERGE would write a delete and a new row for most rows (`REWRITE_SHARE`). Day objects whose days
hold no rows and whose keys are nowhere in the table (an empty table, or new days of keys
not seen before) are appended instead (no MERGE, no staging: nothing to update or delete),
filtered by the tombstones only if one is newer than the oldest object of the run.

Tombstones are the change core's `web_sales_tombstones`, as every declared table keeps
(core/apply/bookkeeping.py: a Delta table beside `web_sales_quarantine`, written by the engine
and read whole by every load, small: one row per deleted key), not an Iceberg table in the
catalog: they are bookkeeping, not something BI should see, and are never pruned (a day can be
backfilled from its raw object any time). Earlier releases kept them in `tpcds_tombstones`,
each naming the Iceberg table it belongs to (`table_uuid`): that table is read too (the current
table's rows), never written again.
"""

import datetime as dt
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from lake_assets.core.apply import bookkeeping
from lake_assets.core.apply.reader import SOURCE_FILE, SOURCE_LINE
from lake_assets.core.cdc import DELETE, OPERATION, merge_sql
from lake_assets.core.errors import LakeError
from lake_assets.core.formats import iceberg
from lake_assets.core.formats.delta import open_table as open_delta
from lake_assets.core.raw_zone import RawObject
from lake_assets.core.sequence import ROW_DIGITS
from lake_assets.core.tables import TPCDS_TOMBSTONES, TPCDS_WEB_SALES
from lake_assets.resources.storage import LakeStorage
from lake_assets.tpcds.parse import SOURCE
from lake_assets.tpcds.schema import (
    DECLARATIONS,
    KEYS,
    PARTITION_COLUMN,
    SEQUENCE,
    TOMBSTONES,
    TpcdsTable,
    engine_name,
    table_columns,
)
from lake_assets.tpcds.sequencing import object_prefix_sql

WEB_SALES = engine_name(TpcdsTable.WEB_SALES)  # in the engine's SQL; the ledger's is TPCDS_WEB_SALES.name
KEY_COLUMNS = list(KEYS[TpcdsTable.WEB_SALES])
COLUMNS = [c for c, _ in table_columns(TpcdsTable.WEB_SALES)]
UPSERT = "U"
IMPLIED_BY = "_implied_by"  # the source whose snapshot implied a delete (SOURCE is NULL on it)
#: Staged changes at least this share of the table's rows are committed by one overwrite of the
#: whole table, not a MERGE: the merge-on-read MERGE writes a position delete and a new row per
#: changed key, so for most of the table a rewrite writes less, and leaves no delete file to read.
REWRITE_SHARE = 0.25


@dataclass(frozen=True)
class Floor:
    """A day object's snapshot: its day's key (None: the rows without a sold date) and floor."""

    day_sk: int | None
    floor: str


def apply_changes(storage: LakeStorage, spark: SparkSession, changes: DataFrame, objects: dict[str, RawObject],
                  floors: dict[str, Floor], into_empty: bool,
                  staging: Callable[[DataFrame], AbstractContextManager[DataFrame]], at: dt.datetime, *,
                  counts: dict[str, int] | None = None, tie: str | None = None, reread: bool = False) -> dict[str, int]:
    """Apply `changes` (SOURCE, OPERATION, the table's columns with SEQUENCE; valid rows only)
    and the snapshots of `floors` (by SOURCE: a day load's; none for corrections); return the
    changes applied per SOURCE. `into_empty`: the days of `floors` hold no rows and no key of
    `changes` is in the table (e.g. the table had no rows when the run began).

    `objects` maps each SOURCE to its raw object (named in tombstones); `staging(frame)` is
    a context manager that writes a frame once and yields it read back (load.staged_parse).
    `counts`: the changes per SOURCE when the caller knows every key has one change (so no
    window ranks them, and an append that no tombstone can touch applies them all without
    counting again). `tie`: a column of `changes` that orders two changes of a key with one
    sequence (a day object's line: its rows share one sequence); it is dropped. `reread`:
    `changes` is cheap to read twice (a staged copy, as corrections are): the table's keys are
    narrowed to the changes' (a semi-join) before their newest rows are found, instead of
    aggregating every key of the table (a day load's changes are parsed from the raw objects,
    which a second read would parse again).
    """
    winners = changes
    if counts is None:  # a key may have several changes: the newest (then the last line) wins
        order = Window.partitionBy(*KEY_COLUMNS).orderBy(
            F.col(SEQUENCE).desc(), *([F.col(tie).desc()] if tie is not None else []))
        winners = changes.withColumn("_rank", F.row_number().over(order)).where("_rank = 1").drop("_rank")
    if tie is not None:
        winners = winners.drop(tie)
    current = iceberg.open_table(storage, TPCDS_WEB_SALES)
    if current is None:  # the loaders create it first (load.ensure_table)
        raise LakeError(f"{TPCDS_WEB_SALES.name} does not exist: nothing to apply changes to")
    table_uuid = str(current.metadata.table_uuid)
    tombstones = (newer_tombstones(storage, spark, floors) if into_empty and floors
                  else _tombstones(storage, spark, table_uuid))
    if tombstones is not None:
        winners = (winners.join(tombstones.select(*KEY_COLUMNS, F.col(SEQUENCE).alias("_tomb")), KEY_COLUMNS, "left")
                   .where(F.col("_tomb").isNull() | (F.col(SEQUENCE) >= F.col("_tomb"))).drop("_tomb"))
    if into_empty and floors:  # day objects into empty days, keys new: only inserts, nothing to delete
        append_rows(winners)
        if counts is not None and tombstones is None:  # every change applied: nothing to count again
            return counts
        return _per_source(winners)

    # per key, its newest row: a key duplicated behind the loader's back (the key check fails
    # it) must not make the MERGE fail with a cardinality violation on every later load
    rows = spark.table(WEB_SALES)
    if reread:
        rows = rows.join(winners.select(*KEY_COLUMNS), KEY_COLUMNS, "left_semi")
    existing = (rows.select(*KEY_COLUMNS, F.coalesce(F.col(SEQUENCE), F.lit("")).alias("_row"))
                .groupBy(*KEY_COLUMNS).agg(F.max("_row").alias("_row")))
    same_object = F.expr(object_prefix_sql(SEQUENCE)) == F.expr(object_prefix_sql("_row"))
    kept = (winners.join(existing, KEY_COLUMNS, "left")
            .where(F.col("_row").isNull() | (F.col(SEQUENCE) >= F.col("_row")) | same_object).drop("_row")
            .select(SOURCE, F.lit(None).cast("string").alias(IMPLIED_BY), OPERATION, *COLUMNS))
    resolved = kept
    if floors and not into_empty:
        resolved = kept.unionByName(_implied_deletes(spark, kept, floors))
    with staging(resolved) as staged:
        _record_tombstones(storage, spark, staged, objects, at)
        if staged.count() >= REWRITE_SHARE * iceberg.row_count(current):
            _rewrite(spark, staged)
        else:
            view = "lake_tpcds_changes"
            staged.createOrReplaceTempView(view)
            same = f"{object_prefix_sql(f's.{SEQUENCE}')} = {object_prefix_sql(f't.{SEQUENCE}')}"
            spark.sql(merge_sql(WEB_SALES, view, KEY_COLUMNS, COLUMNS,
                                newer=f"(s.{SEQUENCE} >= coalesce(t.{SEQUENCE}, '') OR {same})")).collect()
        return _per_source(staged.where(F.col(SOURCE).isNotNull()))


def _rewrite(spark: SparkSession, staged: DataFrame) -> None:
    """Overwrite the whole table with its rows less the staged keys', plus the staged upserts: the commit
    of changes to much of the table. The staged changes passed the sequence rule against this table (the
    run holds its write lease), so no guard is needed; a key the table holds twice (the key check fails
    it) ends with one row. `INSERT OVERWRITE` (Sail: the whole table) also drops the delete files, which
    `writeTo(...).overwrite` refuses to do."""
    kept = spark.table(WEB_SALES).join(staged.select(*KEY_COLUMNS), KEY_COLUMNS, "left_anti")
    upserts = staged.where(F.col(OPERATION) != DELETE)
    view = "lake_tpcds_rewrite"
    kept.select(*COLUMNS).unionByName(upserts.select(*COLUMNS)).createOrReplaceTempView(view)
    spark.sql(f"INSERT OVERWRITE {WEB_SALES} SELECT * FROM {view}").collect()


def newer_tombstones(storage: LakeStorage, spark: SparkSession, floors: dict[str, Floor]) -> DataFrame | None:
    """The tombstones of the table newer than the oldest floor of `floors`: only those can refuse
    a row of these day objects appended into days that hold none (None: there is none)."""
    current = iceberg.open_table(storage, TPCDS_WEB_SALES)
    if current is None:
        return None
    tombstones = _tombstones(storage, spark, str(current.metadata.table_uuid))
    if tombstones is None or not floors:
        return tombstones
    tombstones = tombstones.where(F.col(SEQUENCE) > min(f.floor for f in floors.values()))
    return tombstones if tombstones.limit(1).count() else None


def append_rows(rows: DataFrame) -> None:
    """Append `rows` (the table's columns and more) to the table: day objects' rows into days that
    hold none, of keys the table does not hold, that no tombstone refuses (the caller knows)."""
    rows.select(*COLUMNS).writeTo(WEB_SALES).append()


def rows_per_object(spark: SparkSession, floors: dict[str, Floor]) -> dict[str, int]:
    """Rows per object (the prefix of their `_sequence`) in the days of `floors` (a day object
    writes only its own day): what an append of those objects applied, counted in the table."""
    rows = (spark.table(WEB_SALES).where(_within(floors))
            .groupBy(F.expr(object_prefix_sql(SEQUENCE)).alias("_prefix")).count().collect())
    return {r["_prefix"]: int(r["count"]) for r in rows if r["_prefix"] is not None}


def rows_per_day(spark: SparkSession, floors: dict[str, Floor]) -> dict[str, tuple[int, int]]:
    """Per SOURCE of `floors` whose day holds rows: (the day's rows, those at least as new as
    its floor, which its snapshot does not delete). One aggregate over those days' partitions."""
    days = spark.createDataFrame([(source, f.day_sk, f.floor) for source, f in floors.items()],
                                 "_snapshot STRING, _floor_day BIGINT, _floor STRING")
    rows = spark.table(WEB_SALES).where(_within(floors)).select(
        PARTITION_COLUMN, F.coalesce(F.col(SEQUENCE), F.lit("")).alias("_row"))
    counted = (rows.join(F.broadcast(days), rows[PARTITION_COLUMN].eqNullSafe(days["_floor_day"]))
               .groupBy("_snapshot").agg(F.count(F.lit(1)).alias("rows"),
                                         F.sum(F.when(F.col("_row") >= F.col("_floor"), 1).otherwise(0)).alias("newer"))
               .collect())
    return {r["_snapshot"]: (int(r["rows"]), int(r["newer"] or 0)) for r in counted}


def days_hold_rows(spark: SparkSession, floors: dict[str, Floor]) -> bool:
    """Whether the table holds a row in one of the days of `floors` (reads those partitions only)."""
    return bool(spark.table(WEB_SALES).where(_within(floors)).select(PARTITION_COLUMN).limit(1).count())


def _within(floors: dict[str, Floor]) -> Column:
    sks = [f.day_sk for f in floors.values() if f.day_sk is not None]
    within = F.col(PARTITION_COLUMN).isin(sks) if sks else F.lit(False)
    if any(f.day_sk is None for f in floors.values()):
        within = within | F.col(PARTITION_COLUMN).isNull()
    return within


def _implied_deletes(spark: SparkSession, kept: DataFrame, floors: dict[str, Floor]) -> DataFrame:
    """Rows of the snapshots' days older than their floor that the run does not upsert: deletes at the floor."""
    days = spark.createDataFrame([(source, f.day_sk, f.floor) for source, f in floors.items()],
                                 "_snapshot STRING, _floor_day BIGINT, _floor STRING")
    candidates = (spark.table(WEB_SALES).where(_within(floors)).select(  # the loaded days only: other partitions pruned
        *KEY_COLUMNS, F.col(PARTITION_COLUMN).alias("_day"), F.coalesce(F.col(SEQUENCE), F.lit("")).alias("_row"))
        .groupBy(*KEY_COLUMNS, "_day").agg(F.max("_row").alias("_row")))  # one delete per key, as above
    doomed = (candidates.join(F.broadcast(days), candidates["_day"].eqNullSafe(days["_floor_day"]))
              .where(F.col("_row") < F.col("_floor"))
              .join(kept.select(*KEY_COLUMNS), KEY_COLUMNS, "left_anti"))
    types = dict(table_columns(TpcdsTable.WEB_SALES))
    values = [F.col(c) if c in KEY_COLUMNS else F.col("_floor").alias(c) if c == SEQUENCE
              else F.lit(None).cast(types[c]).alias(c) for c in COLUMNS]
    return doomed.select(F.lit(None).cast("string").alias(SOURCE), F.col("_snapshot").alias(IMPLIED_BY),
                         F.lit(DELETE).alias(OPERATION), *values)


def _tombstones(storage: LakeStorage, spark: SparkSession, table_uuid: str) -> DataFrame | None:
    """Per deleted key of this table, the sequence of its last delete (None: there is none): from
    `web_sales_tombstones`, and from the rows earlier releases kept for this Iceberg table in
    `tpcds_tombstones` (a table dropped and created again has none of those)."""
    found = [frame.select(*KEY_COLUMNS, SEQUENCE) for frame in (
        bookkeeping.tombstones(spark, storage, TOMBSTONES),
        None if open_delta(storage, TPCDS_TOMBSTONES) is None else
        spark.read.format("delta").load(TPCDS_TOMBSTONES.uri(storage)).where(F.col("table_uuid") == table_uuid))
        if frame is not None]
    if len(found) < 2:
        return found[0] if found else None
    return found[0].unionByName(found[1]).groupBy(*KEY_COLUMNS).agg(F.max(SEQUENCE).alias(SEQUENCE))


def _record_tombstones(storage: LakeStorage, spark: SparkSession, staged: DataFrame, objects: dict[str, RawObject],
                       at: dt.datetime) -> None:
    """Upsert the staged deletes into `web_sales_tombstones` (a newer delete replaces an older one),
    with the object that deleted each key and, for a correction's delete, its line (the row part of
    its sequence); a snapshot's implied delete has none."""
    deletes = staged.where(F.col(OPERATION) == DELETE)
    if not deletes.limit(1).count():
        return
    sources = spark.createDataFrame([(s, o.key) for s, o in objects.items()], f"_by STRING, {SOURCE_FILE} STRING")
    line = F.when(F.col(SOURCE).isNotNull(), F.substring(F.col(SEQUENCE), -ROW_DIGITS, ROW_DIGITS).cast("bigint"))
    rows = (deletes.withColumn("_by", F.coalesce(F.col(SOURCE), F.col(IMPLIED_BY)))
            .join(F.broadcast(sources), "_by", "left")
            .select(*KEY_COLUMNS, SEQUENCE, SOURCE_FILE, line.alias(SOURCE_LINE)))
    bookkeeping.record_tombstones(spark, storage, TOMBSTONES, DECLARATIONS[TpcdsTable.WEB_SALES].key_types, rows, at)


def _per_source(rows: DataFrame) -> dict[str, int]:
    return {r[SOURCE]: int(r["n"]) for r in rows.groupBy(SOURCE).agg(F.count(F.lit(1)).alias("n")).collect()}
