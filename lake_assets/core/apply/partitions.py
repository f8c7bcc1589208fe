"""Partition snapshots: snapshot objects that each hold one partition of the table, not all of it.

A snapshot source declared with `partition: <column>` (usually a `partition_by` column) lays its objects
out as Hive does, one folder per value directly under its prefix: `raw/sales/day=2024-04-01/x.csv`
(`__HIVE_DEFAULT_PARTITION__` names the rows whose value is NULL; a STRING value is URL-decoded,
as Hive writes it). Each object is a snapshot of its folder's partition as of its base (the
stamp plan.py gives every snapshot), what Spark's `INSERT OVERWRITE ... PARTITION` does:

- its rows are upserts, and a row whose column is not the folder's value is quarantined
  (`wrong_partition`: it would land in a partition the object does not replace);
- every key whose last state before the base, as the run knows it (the table's row, its
  tombstone, the run's changes), is a row of that partition, and that the object does not hold,
  is deleted at the base. A key whose row the object refused keeps its row, as with a full load;
- a change older than the newest snapshot applied before the run of the partition it puts a
  key in loses, for a key the table no longer knows (a partition's floor, as a full load's is
  the table's).

The deletes are changes like a CDC file's (`D` at the base, from the object), so the sequence
rule, the change feed, the tombstones and the SCD2 history treat them as they treat any delete:
a newer change of the key, in the run or in the table, wins over them. Other partitions are left
alone: a key the object does not cover keeps its row, however old.
"""

import datetime as dt
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lake_assets.core.declaration import Source, TableDeclaration

#: The folder of the partition of NULL values, as Hive and Spark write it.
NULL_FOLDER = "__HIVE_DEFAULT_PARTITION__"
_INTEGER = re.compile(r"-?[0-9]{1,19}")
_INT_RANGE = {"INT": 2**31, "BIGINT": 2**63}


@dataclass(frozen=True)
class FolderPartition:
    """The partition an object's folder names: the column's value (None: NULL) and the folder."""

    value: Any
    folder: str  # `<column>=<value>` as written


def folder_partition(declaration: TableDeclaration, source: Source, key: str) -> FolderPartition | str:
    """The partition the object at `key` is a snapshot of, or why its place names none."""
    column = source.partition
    assert column is not None  # a partition snapshot source's object
    folder, _, name = key.removeprefix(source.prefix).partition("/")
    example = f"{source.prefix}{column}=<value>/{name or 'part-0' + source.suffix}"
    if not name or "/" in name or not folder.startswith(f"{column}="):
        return (f"not in a {column}=<value> folder directly under {source.prefix} (one partition per object, "
                f"e.g. {example}): never applied; move it there")
    text = folder.removeprefix(f"{column}=")
    value = _typed(declaration.column(column).type, text)
    if value is _NOT_A_VALUE:
        return (f"{folder} does not name a {declaration.column(column).type} value of {column}: never applied; "
                f"move it to its partition's folder ({example})")
    daily = declaration.daily_partitions  # a day the table's Dagster partitions do not hold would have none
    day = None if daily is None or value is None else daily.day(value)
    if daily is not None and day is not None and not daily.holds(day):
        return (f"{folder} ({day}) is outside the table's daily partitions ({daily.start}..{daily.end or 'today'}): "
                f"never applied; move it to its partition's folder ({example}), or widen daily_partitions")
    return FolderPartition(value, folder)


_NOT_A_VALUE = object()


def partition_value(declaration: TableDeclaration, column: str, text: str) -> Any:
    """The value of `column` that `text` names as a folder does (`__HIVE_DEFAULT_PARTITION__`: NULL);
    ValueError if it names none."""
    kind = declaration.column(column).type
    value = _typed(kind, text)
    if value is _NOT_A_VALUE:
        raise ValueError(f"{text!r} is not a {kind} value of {column}")
    return value


def _typed(kind: str, text: str) -> Any:
    """The column value a folder's text names, typed as the column (`_NOT_A_VALUE`: none)."""
    if text == NULL_FOLDER:
        return None
    if kind in _INT_RANGE:
        number = int(text) if _INTEGER.fullmatch(text) else None
        return number if number is not None and -_INT_RANGE[kind] <= number < _INT_RANGE[kind] else _NOT_A_VALUE
    if kind == "DATE":
        try:
            return dt.date.fromisoformat(text) if len(text) == 10 else _NOT_A_VALUE
        except ValueError:
            return _NOT_A_VALUE
    if kind == "BOOLEAN":
        return {"true": True, "false": False}.get(text.lower(), _NOT_A_VALUE)
    decoded = urllib.parse.unquote(text)
    return decoded if decoded else _NOT_A_VALUE


def outside(values: pa.ChunkedArray | pa.Array, partition: FolderPartition) -> pa.ChunkedArray | pa.Array:
    """Which of a column's `values` are not the partition's (NULL is a value of its own)."""
    if partition.value is None:
        return pc.is_valid(values)
    return pc.fill_null(pc.not_equal(values, pa.scalar(partition.value, values.type)), True)


# --- on the engine --------------------------------------------------------------------------------

@dataclass(frozen=True)
class PartitionSnapshot:
    """One partition snapshot a run publishes: its partition, base, readable parts, and the keys of
    its refused rows (None: none was refused)."""

    value: Any
    base: str
    files: list[int]
    protected: DataFrame | None
    source_file: str


@dataclass(frozen=True)
class PartitionSnapshots:
    """A run's partition snapshots, and the floor of each partition (its newest snapshot applied before)."""

    column: str
    published: list[PartitionSnapshot]
    floors: dict[Any, str]
    #: the run's changes are these snapshots' rows only (no CDC file with them)
    alone: bool = False

    @property
    def alone_per_partition(self) -> bool:
        """Whether the run's changes are these snapshots' rows only, one snapshot per partition: then
        a key's last state before a snapshot's base is its table row, if it has one (a first load or
        a reload of some partitions, an object each)."""
        values = [s.value for s in self.published]
        return self.alone and len(set(values)) == len(values)


def partition_text(value: Any) -> str:
    """A partition value as the engine prints it (`CAST(column AS STRING)`), NULL's as its folder."""
    if value is None:
        return NULL_FOLDER
    if isinstance(value, bool):
        return "true" if value else "false"
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def partition_key(value: SparkColumn) -> SparkColumn:
    """A partition column's value as text (`partition_text`): what the run's partitions are joined
    on (an equi-join, NULL's partition included)."""
    return F.coalesce(value.cast("string"), F.lit(NULL_FOLDER))


def in_partitions(column: str, values: list[Any]) -> SparkColumn:
    """Rows of any of `values`' partitions: a filter the table's partitioning prunes by."""
    chosen = F.col(column).isin([v for v in values if v is not None])
    return chosen | F.col(column).isNull() if None in values else chosen


def implied_deletes(keys: list[str], columns: dict[str, SparkColumn], events: DataFrame, table: DataFrame | None,
                    tombstones: DataFrame | None, snapshots: PartitionSnapshots, sequence: str, operation: str,
                    file_index: str, source_file: str) -> DataFrame | None:
    """The deletes the run's partition snapshots imply (see the module's docstring), as `events` rows:
    the key, `D` at the snapshot's base, the snapshot's object; `columns` gives the rest of a row
    (NULLs, typed). None: the run publishes no partition snapshot, or none can delete.

    Only the table's rows of the snapshots' partitions are read for the candidates. When the run's
    changes are its snapshots' rows alone, one per partition, a key's last state before a base is its
    table row, so the deletes are those rows less the snapshot's keys; otherwise the run's changes
    and tombstones (and the table rows of the keys found) say whether a key left the partition."""
    if not snapshots.published or (table is None and tombstones is None and snapshots.alone_per_partition):
        return None
    spark = events.sparkSession
    column = snapshots.column
    each = spark.createDataFrame([(i, partition_text(s.value), s.base, s.source_file)
                                  for i, s in enumerate(snapshots.published)],
                                 "_snap INT, _pk STRING, _base STRING, _snap_file STRING")
    parts = spark.createDataFrame([(f, i) for i, s in enumerate(snapshots.published) for f in s.files] or [],
                                  "_part INT, _snap INT")

    def states(frame: DataFrame, gone: SparkColumn, partition: SparkColumn | None = None) -> DataFrame:
        """(keys, `_pk`, `_cs`, `_gone`): each row's partition, sequence, and whether it is a delete."""
        value = F.col(column) if partition is None else partition
        return frame.select(*keys, partition_key(value).alias("_pk"),
                            F.coalesce(F.col(sequence), F.lit("")).alias("_cs"), gone.alias("_gone"))

    scoped = None if table is None else \
        states(table.where(in_partitions(column, [s.value for s in snapshots.published])), F.lit(False))
    candidates = scoped if snapshots.alone_per_partition else \
        states(events, F.col(operation) == "D") if scoped is None else \
        states(events, F.col(operation) == "D").unionByName(scoped)
    if candidates is None:
        return None
    # the newest row of each key in a snapshot's partition before its base ...
    within = candidates.where(~F.col("_gone")).join(F.broadcast(each), "_pk").where(F.col("_cs") < F.col("_base"))
    last = within.groupBy(*keys, "_snap", "_pk", "_base").agg(F.max("_cs").alias("_last"))
    doomed = last
    if not snapshots.alone_per_partition:  # ... unless a later state before the base took it elsewhere
        later = states(events, F.col(operation) == "D")
        if table is not None:  # the table's row of a key found by a change of the run may be in another partition
            later = later.unionByName(states(table.join(last.select(*keys).distinct(), keys, "left_semi"),
                                             F.lit(False)))
        if tombstones is not None:
            later = later.unionByName(states(tombstones, F.lit(True), F.lit(None)))
        moved = later.withColumnRenamed("_pk", "_then").join(last, keys) \
            .where((F.col("_cs") > F.col("_last")) & (F.col("_cs") < F.col("_base")) &
                   (F.col("_gone") | (F.col("_then") != F.col("_pk")))).select(*keys, "_snap")
        doomed = doomed.join(moved, [*keys, "_snap"], "left_anti")
    held = events.join(F.broadcast(parts), F.col(file_index) == F.col("_part")).select(*keys, "_snap")
    for i, published in enumerate(snapshots.published):
        if published.protected is not None:
            held = held.unionByName(published.protected.select(*keys, F.lit(i).alias("_snap")))
    doomed = doomed.join(held, [*keys, "_snap"], "left_anti")
    return doomed.join(F.broadcast(each.select("_snap", "_snap_file")), "_snap").select(
        *keys, *[value.alias(name) for name, value in columns.items()], F.lit("D").alias(operation),
        F.col("_snap_file").alias(source_file), F.col("_base").alias(sequence))


def with_floors(events: DataFrame, snapshots: PartitionSnapshots) -> DataFrame:
    """`events` with `_floor`: the floor of the partition each puts its key in (NULL: none has one)."""
    spark = events.sparkSession
    floors = spark.createDataFrame([(partition_text(v), floor) for v, floor in snapshots.floors.items()],
                                   "_fk STRING, _floor STRING")
    return events.withColumn("_fk", partition_key(F.col(snapshots.column))).join(F.broadcast(floors), "_fk", "left") \
        .drop("_fk")
