"""Write a Delta table's change feed on the engine (Delta CDF semantics; core/change_feed.py).

Sail cannot write Delta's own change data feed, so the lake keeps the feed as a table beside
the table: the table's columns plus `_change_type` (insert, update_preimage, update_postimage,
delete), `_commit_version` and `_commit_timestamp`. A run knows what its commit did: the rows
it replaced (the table's rows of the keys it changed, read at the version it found) and the
rows it wrote; the feed of its commit is made from those (`write_version`). A commit made
outside a run (a restore, a delta-rs rewrite) has its feed derived from the Delta log by the
next run (`catch_up`): the rows of the files the commit removed against the rows of the files
it added. Either way a row present, equal, on both sides is a copy-on-write carry-over, not a
change; per key (unique in the table): only removed -> delete, only added -> insert, both ->
update_preimage + update_postimage. Writing a version replaces that version's rows, so a rerun
converges.

The table's first commit (version 0: every row an insert) is not copied: the feed answers it
from the files that commit added (core/change_feed.py reads them when asked).
"""

import datetime as dt

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from lake_assets.core.change_feed import (
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    FROM_FILES,
    ChangeType,
    Commit,
    FeedReport,
    FeedUnavailable,
    covered_through,
    read_commit,
)
from lake_assets.core.formats.delta import add_columns, open_table
from lake_assets.core.formats.delta_files import read_files
from lake_assets.core.instants import timestamp_literal
from lake_assets.core.tables import LakeTable
from lake_assets.resources.storage import LakeStorage

#: Which side of a commit a row is on: 0 the rows it replaced, 1 the rows it wrote.
_SIDE = "_side"


def change_rows(removed: DataFrame, added: DataFrame, keys: list[str], columns: list[str], version: int,
                timestamp: dt.datetime | None) -> DataFrame:
    """The change rows of a commit that replaced the rows `removed` by the rows `added`.

    Each side is read once (a table read behind `removed` is not repeated per use): the two are
    stacked, a row equal on both sides drops out (grouped by every column), and each remaining
    row's type follows from which sides its key is left on."""
    both = (removed.select(*columns, F.lit(0).alias(_SIDE))
            .unionByName(added.select(*columns, F.lit(1).alias(_SIDE))))
    changed = (both.groupBy(*columns).agg(F.min(_SIDE).alias("_first"), F.max(_SIDE).alias("_last"))
               .where(F.col("_first") == F.col("_last")).select(*columns, F.col("_first").alias(_SIDE)))
    per_key = Window.partitionBy(*keys)
    was_removed = F.col(_SIDE) == 0
    updated = (F.min(_SIDE).over(per_key) == 0) & (F.max(_SIDE).over(per_key) == 1)  # both sides: an update
    change = (F.when(was_removed & updated, F.lit(ChangeType.UPDATE_PREIMAGE.value))
              .when(was_removed, F.lit(ChangeType.DELETE.value))
              .when(updated, F.lit(ChangeType.UPDATE_POSTIMAGE.value))
              .otherwise(F.lit(ChangeType.INSERT.value)))
    return changed.select(*columns, change.alias(CHANGE_TYPE), F.lit(version).cast("bigint").alias(COMMIT_VERSION),
                          timestamp_literal(timestamp).alias(COMMIT_TIMESTAMP))


def write_version(spark: SparkSession, storage: LakeStorage, table: LakeTable, feed: LakeTable, keys: list[str],
                  columns: list[str], removed: DataFrame, added: DataFrame, version: int,
                  first_commit: bool = False) -> FeedReport:
    """Write the feed of `version` from the rows it replaced and wrote (`first_commit`: the
    table's first, answered from its files, nothing copied)."""
    if first_commit and version == FROM_FILES:
        _ensure(spark, storage, feed, columns, table)
        report = FeedReport([version], covered_through=version)
        report.rows[ChangeType.INSERT] = int(added.count())
        return report
    commit = read_commit(storage, table, version)
    rows = change_rows(removed, added, keys, columns, version, commit.timestamp)
    return _write(spark, storage, table, feed, columns, rows, version, version)


def catch_up(spark: SparkSession, storage: LakeStorage, table: LakeTable, feed: LakeTable,
             keys: list[str]) -> FeedReport:
    """Derive and write the feed of every table version newer than the feed's newest, from the log
    (every column the table has now: a column another writer added reaches the feed too)."""
    current = open_table(storage, table)
    if current is None:
        return FeedReport()
    through = covered_through(storage, feed)
    newest = current.version()
    report = FeedReport(covered_through=newest)
    start = 0 if through is None else through + 1
    if start > newest:
        return report
    schema = spark.read.format("delta").load(table.uri(storage)).schema
    columns = schema.names
    if through is None:  # the table's first commit: answered from its files, not copied
        _ensure(spark, storage, feed, columns, table)
        first = read_commit(storage, table, FROM_FILES)
        report.rows[ChangeType.INSERT] += first.records_added or 0
        report.versions += [FROM_FILES] if first.records_added else []
        start = FROM_FILES + 1
    for version in range(start, newest + 1):
        commit = read_commit(storage, table, version)
        if not commit.added and not commit.removed:
            continue
        removed, added = commit_files(spark, storage, table, schema, commit)
        rows = change_rows(removed, added, keys, columns, version, commit.timestamp)
        report = report.add(_write(spark, storage, table, feed, columns, rows, version, version))
    report.covered_through = newest
    return report


def commit_files(spark: SparkSession, storage: LakeStorage, table: LakeTable, schema,
                 commit: Commit) -> tuple[DataFrame, DataFrame]:
    """(the rows of the data files `commit` removed, the rows of those it added), read with the
    table's current schema (a column added later reads NULL; partition columns from the log).

    Raises FeedUnavailable if one of them is gone (a vacuum took it): Sail reads a missing path as
    no rows, which would turn the commit's updates into inserts."""
    client = storage.get_client()
    for path in (*commit.removed, *commit.added):
        try:
            client.head_object(Bucket=storage.bucket, Key=f"{table.prefix}/{path}")
        except client.exceptions.ClientError as error:
            if error.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                raise
            raise FeedUnavailable(f"{table.name} v{commit.version}: its data file {path} is gone (vacuumed); "
                                  "the feed can only be derived for versions whose files are kept") from None
    root = table.uri(storage)
    return (read_files(spark, root, schema, commit.removed, commit.partitions),
            read_files(spark, root, schema, commit.added, commit.partitions))


def _ensure(spark: SparkSession, storage: LakeStorage, feed: LakeTable, columns: list[str], table: LakeTable) -> None:
    """Create the feed table, empty, if it does not exist (it then answers version 0 from its files)."""
    if open_table(storage, feed) is not None:
        return
    schema = spark.read.format("delta").load(table.uri(storage)).select(*columns).schema
    empty = spark.createDataFrame([], schema).select(
        *columns, F.lit(None).cast("string").alias(CHANGE_TYPE), F.lit(None).cast("bigint").alias(COMMIT_VERSION),
        F.lit(None).cast("timestamp").alias(COMMIT_TIMESTAMP))
    empty.write.format("delta").mode("append").save(feed.uri(storage))


def _write(spark: SparkSession, storage: LakeStorage, table: LakeTable, feed: LakeTable, columns: list[str],
           rows: DataFrame, start: int, end: int) -> FeedReport:
    """Replace the feed's rows of versions `start`..`end` by `rows` (one commit); the counts per
    change type are read back from the rows written (the files of that commit: no second derive)."""
    _ensure(spark, storage, feed, columns, table)
    where = f"{COMMIT_VERSION} >= {start} AND {COMMIT_VERSION} <= {end}"
    stored = open_table(storage, feed)
    if stored is not None:
        add_columns(stored, [(f.name, f.dataType.simpleString()) for f in rows.schema])
    rows.write.format("delta").mode("overwrite").option("replaceWhere", where).save(feed.uri(storage))
    written = spark.read.format("delta").load(feed.uri(storage)).where(where)
    report = FeedReport(covered_through=end)
    for row in written.groupBy(COMMIT_VERSION, CHANGE_TYPE).agg(F.count(F.lit(1)).alias("n")).collect():
        report.rows[row[CHANGE_TYPE]] += int(row["n"])
        if row[COMMIT_VERSION] not in report.versions:
            report.versions.append(int(row[COMMIT_VERSION]))
    report.versions.sort()
    return report
