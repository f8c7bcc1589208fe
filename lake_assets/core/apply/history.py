"""SCD type 2 history on the source's sequence axis, written on the engine.

As `APPLY CHANGES ... SEQUENCE BY s STORED AS SCD TYPE 2` gives it: one row per version a key
had in the source, valid from its sequence until the key's next change on that axis. The
history is written from the changes a run resolved (resolve.py), not read back from the
table's log, so it keeps what the table cannot: several changes of a key in one batch each
give a version, and a late change (older than the key's row) is placed where it belongs,
closing the version before it and closed by the change after it. A delete is a row of its own
(`_operation = 'D'`, valid at no point: `valid_to_sequence` is its own sequence), so a change
arriving later is closed by it whatever order changes arrive in; `WHERE _operation <> 'D'`
gives DLT's rows. A snapshot's (or truncate's) deletes and the tombstones' deletes that may close a
late change come as candidates (`closing`, resolve.py): one is recorded only where it ends a live
version, judged on the key's rows stored and new (`closes`), so a key live just before a snapshot
gets its delete there even when a newer change brings it back, and a key already deleted (or a late
change a delete of the history already closes) gets no second one, whichever runs brought them.

Columns: the table's (its `_sequence` is where the version starts) plus `valid_to_sequence`
(the key's next change; NULL while current), `valid_from` / `valid_to` (the times of those
sequences, NULL for a snapshot stamped as of its arrival: that stamp orders, it does not
date), `is_current` and `commit_version` (the table version the recording run left).

A write replaces the rows of the keys it touches: it reads the history rows within the key
ranges of the files holding them (found on the engine, as the table commit finds its own),
drops the (key, sequence) pairs it records again (a rerun converges), adds the new changes,
recomputes every version's validity with one window per key, and writes the ranges back in
one Delta commit (`replaceWhere`). A key that is not an integer rewrites the whole history.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from deltalake import DeltaTable

from lake_assets.core.apply.cluster import file_cuts, laid_out
from lake_assets.core.apply.commit import predicate, rows_within, touched_ranges
from lake_assets.core.apply.resolve import DELETE
from lake_assets.core.apply.unique import keys_unique
from lake_assets.core.apply.reader import SEQUENCE
from lake_assets.core.apply.validate import OPERATION
from lake_assets.core.formats.delta import add_columns, file_ranges, row_count

VALID_TO_SEQUENCE, VALID_FROM, VALID_TO = "valid_to_sequence", "valid_from", "valid_to"
IS_CURRENT, COMMIT_VERSION = "is_current", "commit_version"
VALIDITY = [VALID_TO_SEQUENCE, VALID_FROM, VALID_TO, IS_CURRENT, COMMIT_VERSION]
#: Parts from this number up mark a snapshot stamped as of its arrival (core/sequence.py).
ARRIVAL_PART = "900000"
MICRO = Decimal("0.000001")
#: A batch of at most this many changes is sent whole to every task of a history write.
BROADCAST_ROWS = 100_000
#: The column an earlier release's history (on the commit axis) had; such a history starts over.
LEGACY_COLUMN = "valid_from_version"


def sequence_time(sequence: SparkColumn) -> SparkColumn:
    """The time part of a sequence (`YYYYMMDDHHMMSSfffffffff.part...`, or the earlier format's
    `YYYYMMDDHHMMSSfff.part...`: core/sequence.py) to the microsecond, NULL for an arrival stamp
    or none."""
    # split and arithmetic, not substring or regexp_replace: Sail's cluster mode cannot ship those
    # to its workers
    fields = F.split(sequence, r"\.")
    time, part = fields.getItem(0), fields.getItem(1)
    digits = time.cast("decimal(23,0)")
    nanos = F.when(F.length(time) == 17, digits * F.lit(1_000_000)).otherwise(digits).cast("decimal(23,0)")

    date = F.floor(nanos / F.lit(10**15)).cast("bigint")  # YYYYMMDD
    clock = (nanos % F.lit(10**15)).cast("bigint")  # HHMMSS and nine digits of the second

    def digits_of(number: SparkColumn, scale: int) -> SparkColumn:
        return (F.floor(number / F.lit(10**scale)) % F.lit(100)).cast("int")

    seconds = (F.floor(clock / F.lit(1000)) % F.lit(10**8)).cast("decimal(8,0)") * F.lit(MICRO)
    stamp = F.make_timestamp(F.floor(date / F.lit(10**4)).cast("int"), digits_of(date, 2), digits_of(date, 0),
                             digits_of(clock, 13), digits_of(clock, 11), seconds.cast("decimal(8,6)"))
    arrival = part >= F.lit(ARRIVAL_PART)
    return F.when(sequence.isNull() | arrival, F.lit(None).cast("timestamp")).otherwise(stamp)


@dataclass(frozen=True)
class Tracking:
    """How a table's history is kept: `tracked`, the columns whose change makes a new version
    (None: every column: `TRACK HISTORY ON *`), and whether its sequences are times (`timed`:
    `valid_from`/`valid_to` are NULL for a `sequence_by` number)."""

    tracked: tuple[str, ...] | None = None
    timed: bool = True


def versions(rows: DataFrame, keys: list[str], columns: list[str], tracking: Tracking = Tracking()) -> DataFrame:
    """`rows` (the table's `columns` and `commit_version`) with each version's validity: a version
    is valid until the key's next change, a delete at no point. With tracked columns, consecutive
    changes of a key that leave them equal are one version: it starts at the first of them and
    holds the last one's values (an untracked change updates the version in place)."""
    if tracking.tracked is not None:
        rows = _collapsed(rows, keys, columns, list(tracking.tracked))
    order = Window.partitionBy(*keys).orderBy(F.col(SEQUENCE))
    return _validity(rows, columns, F.lead(F.col(SEQUENCE)).over(order), tracking)


def single_versions(rows: DataFrame, columns: list[str], tracking: Tracking = Tracking()) -> DataFrame:
    """`versions` of `rows` holding one change per key, without its window: each row is its key's
    only version, current unless it is a delete (valid at no point)."""
    return _validity(rows, columns, F.lit(None).cast("string"), tracking)


def _validity(rows: DataFrame, columns: list[str], following: SparkColumn, tracking: Tracking) -> DataFrame:
    """`rows` with their validity, given each one's `following` change of its key (NULL: none)."""
    deleted = F.col(OPERATION) == DELETE
    ended = F.when(deleted, F.col(SEQUENCE)).otherwise(following)
    with_end = rows.select(*columns, COMMIT_VERSION, ended.alias(VALID_TO_SEQUENCE),
                           (following.isNull() & ~deleted).alias(IS_CURRENT))
    starts, ends = sequence_time(F.col(SEQUENCE)), sequence_time(F.col(VALID_TO_SEQUENCE))
    if not tracking.timed:
        starts = ends = F.lit(None).cast("timestamp")
    return with_end.select(*columns, VALID_TO_SEQUENCE, starts.alias(VALID_FROM), ends.alias(VALID_TO), IS_CURRENT,
                           COMMIT_VERSION)


def _collapsed(rows: DataFrame, keys: list[str], columns: list[str], tracked: list[str]) -> DataFrame:
    """One row per run of a key's consecutive upserts with equal tracked columns: the first's
    sequence, the last one's other values (a delete is always a row of its own)."""
    order = Window.partitionBy(*keys).orderBy(F.col(SEQUENCE))
    deleted = F.col(OPERATION) == DELETE
    before_deleted = F.coalesce(F.lag(F.col(OPERATION)).over(order) == DELETE, F.lit(True))
    # one flat GREATEST, not an OR per column: a plan message as deep as the table is wide is
    # refused by Spark Connect's protobuf past ~45 levels
    differs = [(~F.col(c).eqNullSafe(F.lag(F.col(c)).over(order))).cast("int") for c in tracked]
    changed = F.lit(False) if not differs else (differs[0] if len(differs) == 1 else F.greatest(*differs)) == 1
    starts = rows.withColumn("_starts", F.when(deleted | before_deleted | changed, 1).otherwise(0))
    grouped = starts.withColumn("_version", F.sum("_starts").over(order.rowsBetween(Window.unboundedPreceding,
                                                                                     Window.currentRow)))
    whole = Window.partitionBy(*keys, "_version").orderBy(F.col(SEQUENCE)) \
        .rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    first = Window.partitionBy(*keys, "_version").orderBy(F.col(SEQUENCE))
    latest = [F.col(c) if c in keys or c == SEQUENCE else F.last(F.col(c)).over(whole).alias(c)
              for c in [*columns, COMMIT_VERSION]]
    return (grouped.select(*latest, F.row_number().over(first).alias("_rank"))
            .where(F.col("_rank") == 1).drop("_rank"))


def record(spark: SparkSession, uri: str, found: DeltaTable | None, changes: DataFrame, keys: list[str],
           columns: list[str], integer_key: bool, commit_version: int | None, key_type: str = "bigint",
           tracking: Tracking = Tracking(), closing: DataFrame | None = None, first_cuts: Sequence[int] = ()) -> int:
    """Add `changes` (the table's `columns`, one row per change, deletes included) to the history
    at `uri` (`found`: as it is now, None when there is none), recorded at `commit_version`, and
    those of the deletes `closing` that end a live version (`closes`). The number of rows added:
    0 when there was nothing to record. `first_cuts`: where a first history's files begin (the
    table's own, just written: the history's rows are not read once more for quantiles)."""
    changes = changes.select(*columns).withColumn(COMMIT_VERSION, F.lit(commit_version).cast("bigint"))
    count = int(changes.count())
    candidates, considered = None, 0
    if closing is not None:
        candidates = closing.select(*columns).withColumn(COMMIT_VERSION, F.lit(commit_version).cast("bigint")) \
            .dropDuplicates([*keys, SEQUENCE])
        considered = int(candidates.count())
    if not count and not considered:
        return 0
    if found is None:
        if considered:
            assert candidates is not None
            changes = changes.unionByName(closes(changes, candidates, keys))
            count = int(changes.count())
            if not count:
                return 0
        first = single_versions(changes, columns, tracking) if keys_unique(changes.select(*keys), keys) else \
            versions(changes, keys, columns, tracking)
        _write(first, keys, integer_key, count, first_cuts).mode("append").save(uri)
        return count
    batch = changes if candidates is None else changes.unionByName(candidates)
    where, rows, cuts = None, count + considered + row_count(found), []
    if integer_key:  # the files holding the batch's keys, by their key ranges
        mins, maxs, files_rows = file_ranges(found, keys[0])
        ranges = touched_ranges(spark, batch.select(keys[0]), mins, maxs)
        where = predicate(keys[0], ranges, key_type)
        rows = count + considered + rows_within(ranges, mins, maxs, files_rows)
        cuts = file_cuts(mins, maxs, ranges)
    stored = spark.read.format("delta").load(uri)
    added = [c for c in columns if c not in stored.columns]  # a contract version declared since: NULL before
    for column in added:
        stored = stored.withColumn(column, F.lit(None).cast(changes.schema[column].dataType))
    if where is not None:
        stored = stored.where(where)
    # only the batch's keys get their versions computed again; the other rows of the files the
    # write replaces pass through as stored (a small batch's keys go to every task: no shuffle)
    touched = batch.select(*keys).distinct()
    again = changes.select(*keys, SEQUENCE)
    if count + considered <= BROADCAST_ROWS:
        touched, again = F.broadcast(touched), F.broadcast(again)
    stored = stored.select(*columns, *VALIDITY)
    untouched = stored.join(touched, keys, "left_anti")
    kept = stored.join(touched, keys, "left_semi").select(*columns, COMMIT_VERSION) \
        .join(again, [*keys, SEQUENCE], "left_anti")
    if considered:
        assert candidates is not None
        closed = closes(kept.unionByName(changes), candidates, keys)
        count += int(closed.count())
        if not count:
            return 0
        changes = changes.unionByName(closed)
    rows_out = versions(kept.unionByName(changes), keys, columns, tracking).unionByName(untouched)
    if added:  # the history gains the columns first (one schema change), as the table did
        add_columns(found, [(f.name, f.dataType.simpleString()) for f in rows_out.schema])
    writer = _write(rows_out, keys, integer_key, rows, cuts).mode("overwrite")
    if where is not None:
        writer = writer.option("replaceWhere", where)
    writer.save(uri)
    return count


def closes(rows: DataFrame, candidates: DataFrame, keys: list[str]) -> DataFrame:
    """The `candidates` (deletes, at most one per key and sequence) that end a live version of
    their key among `rows` (its history, stored and new): the key's row just before one is not a
    delete, no row is at its sequence, and it is the first candidate after that row (a later one
    would delete the key again). So a snapshot's delete goes only to a key it found live, and a
    delete closing a late change only where no delete of the history already closes it."""
    real = rows.select(*keys, SEQUENCE, OPERATION, F.lit(0).alias("_candidate"))
    both = real.unionByName(candidates.select(*keys, SEQUENCE, OPERATION, F.lit(1).alias("_candidate")))
    # at one sequence a row of the history comes before a candidate: it is the row "just before"
    order = Window.partitionBy(*keys).orderBy(F.col(SEQUENCE), F.col("_candidate")) \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    is_row = F.col("_candidate") == 0
    marked = both.select(*keys, SEQUENCE, "_candidate",
                         F.last(F.when(is_row, F.col(SEQUENCE)), ignorenulls=True).over(order).alias("_before"),
                         F.last(F.when(is_row, F.col(OPERATION)), ignorenulls=True).over(order).alias("_before_op"))
    live = marked.where((F.col("_candidate") == 1) & (F.col("_before") < F.col(SEQUENCE)) &
                        (F.col("_before_op") != F.lit(DELETE)))
    first = Window.partitionBy(*keys, "_before").orderBy(F.col(SEQUENCE))
    chosen = live.withColumn("_rank", F.row_number().over(first)).where(F.col("_rank") == 1).select(*keys, SEQUENCE)
    return candidates.join(chosen, [*keys, SEQUENCE], "left_semi")


def start_over(uri: str, found: DeltaTable | None, table: DataFrame, keys: list[str], columns: list[str],
               commit_version: int, tracking: Tracking = Tracking()) -> bool:
    """Replace a history an earlier release wrote on the commit axis (it has `valid_from_version`)
    by the table's rows, each a version from its `_sequence`: the earlier versions are not on the
    source axis and are not kept. True if it did."""
    if found is None or LEGACY_COLUMN not in found.schema().to_arrow().names:
        return False
    rows = table.select(*columns).withColumn(COMMIT_VERSION, F.lit(commit_version).cast("bigint"))
    _write(versions(rows, keys, columns, tracking), keys, True, row_count(found)).mode("overwrite") \
        .option("overwriteSchema", "true").save(uri)
    return True


def _write(rows: DataFrame, keys: list[str], integer_key: bool, count: int, cuts: Sequence[int] = ()):
    """A Delta writer of `rows` in files of disjoint key ranges (cluster.py), as the table's are:
    a small batch rewrites the few files holding its keys (`cuts`: where the files it replaces began)."""
    return laid_out(rows, keys, integer_key, count, cuts).write.format("delta")
