"""Resolve a run's changes per key, on the engine: `APPLY CHANGES ... SEQUENCE BY`.

Every change carries a sequence (core/sequence.py), and a key takes a change only if it is at
least as new as the key's row (`_sequence` on the row; a row without one is older than any)
and its tombstone (the last delete, remembered for the retention window). Within a run the
newest change per key is the candidate; the others are superseded: counted, kept in the SCD2
history, not applied. Ties re-apply, so a rerun converges.

A published snapshot is a full load "as of" its base B: its rows are changes, and every other
key whose newest change (row, tombstone or this run's) is not newer than B is deleted as of B
(an `implied` delete, tombstoned at B), except keys whose snapshot row was refused (protected:
they keep their current row); a change of such a key older than B loses. A change older than
the newest snapshot applied before this run (`floor`) loses for a key the table no longer knows.

The SCD2 history takes a delete at B for every key the snapshot covers (the run knows it, it is
outside the snapshot and not protected) that was live just before B, whether the snapshot
deletes it from the table or a newer change of the run brings it back; not for a key already
deleted then, nor one it never had. Whether a key was live is read from the history itself
(history.py), so the deletes are the same whether the changes came in one run or in several: the
run hands them over as candidates (`implied`, `closing`). So is every other snapshot the run
publishes (`earlier`: older full loads and truncates; only the newest is the published snapshot
the table takes), for each key that may have been live just before it and that it does not hold,
and a tombstone's sequence for a key
the table no longer holds, when the run has a change of it older than the tombstone (a late
change: the delete closes it, unless the history already has one there or the key was not live).

The result is ONE frame (staged once by the caller, `stage.py`) holding every change the run
keeps, each with its role: `apply` (it goes into the table commit), `kept` (recorded in the
history only), `implied` (a snapshot's delete of a key: the table commit, a tombstone, and a
candidate delete for the history) or `closing` (a candidate delete for the history only), and
`_present` (the key has a row in the table as the run found it). The table commit, its change
feed, the tombstones, the SCD2 history and the per-file counts all come from it.
"""

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from lake_assets.core.apply.reader import FILE_INDEX, SEQUENCE, SNAPSHOT_OPERATION, SOURCE_FILE, SOURCE_LINE
from lake_assets.core.apply.partitions import PartitionSnapshots, implied_deletes, with_floors
from lake_assets.core.apply.unique import keys_unique
from lake_assets.core.apply.validate import OPERATION
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.instants import timestamp_literal

ROLE, PRESENT, APPLIED_AT = "_role", "_present", "_applied_at"
DELETE = "D"
_EXISTING = "_existing"


class Role(StrEnum):
    APPLY = "apply"
    KEPT = "kept"
    IMPLIED = "implied"
    CLOSING = "closing"


@dataclass(frozen=True)
class PublishedSnapshot:
    """The snapshot a run publishes: its base, the files of its parts, and the keys of its refused rows."""

    base: str
    files: list[int]
    protected: DataFrame | None  # key columns; None: no row of it was refused
    source_file: str  # the object named in its implied deletes' tombstones and history rows
    #: the run's changes are this snapshot's rows only (no CDC file with it): into a table with no
    #: row and no tombstone it then deletes nothing
    alone: bool = field(default=False, kw_only=True)
    #: an `APPLY AS TRUNCATE`: a snapshot of no rows (a full load is not one, even with none readable)
    truncate: bool = field(default=False, kw_only=True)


def table_columns(declaration: TableDeclaration) -> list[str]:
    """The curated table's columns: the first contract's, the audit columns, then the columns later
    contract versions added (Delta appends an added column at the end, so a table created today
    and one evolved from v1 agree); `except_columns` are not written."""
    written = declaration.written
    first = [n for n in declaration.contracts[0].names if n in written]
    later = [n for n in written if n not in first]
    return [*first, *AUDIT, *later]


#: The audit columns every curated row carries.
AUDIT = [OPERATION, SOURCE_FILE, SOURCE_LINE, APPLIED_AT, SEQUENCE]
#: Their Spark SQL types.
AUDIT_TYPES = {OPERATION: "string", SOURCE_FILE: "string", SOURCE_LINE: "bigint", APPLIED_AT: "timestamp",
               SEQUENCE: "string"}


def resolve(declaration: TableDeclaration, changes: DataFrame, table: DataFrame | None, tombstones: DataFrame | None,
            floor: str | None, snapshot: PublishedSnapshot | None, applied_at: dt.datetime,
            earlier: Sequence[PublishedSnapshot] = (), partitions: PartitionSnapshots | None = None,
            again: Sequence[int] = ()) -> DataFrame:
    """The run's resolved changes (see the module's docstring).

    `changes`: the reader's valid rows of the objects this run applies (CDC files and the
    published snapshot's parts; truncates left out: a truncate is a `snapshot` with no rows);
    `table`: the table's rows as the run found them, `tombstones` (keys, `_sequence`,
    `source_file` and `source_line`) its tombstones (None: there are none); `earlier`: the run's
    other published snapshots, full loads and truncates, all older than `snapshot` (what they
    delete, it deletes too: they change only the history, and what an update's NULLs may take).
    A full load's rows are among `changes` whichever snapshot it is. `partitions`: the run's
    partition snapshots (partitions.py), whose rows are among `changes` too, and the partitions' floors.
    `again`: the objects (their `_file`) loaded again as of the stamps they were applied with (`lake
    backfill`): a change of theirs is, at its own sequence, the row it made, so it does not apply
    over that row (a tie re-applies for any other); one that does not apply is left out (the history
    has it since the object was first applied).
    """
    keys = list(declaration.keys)
    data = [c for c in declaration.written if c not in keys]
    existing = _existing(keys, table, tombstones)
    events = changes.select(*keys, *data, OPERATION, SOURCE_FILE, SOURCE_LINE, SEQUENCE, FILE_INDEX)
    implied = None
    if partitions is not None:  # a partition snapshot's deletes are changes of the run, as a CDC file's
        types = {c.name: c.type for c in declaration.columns}
        nulls = {c: F.lit(None).cast(types[c]) for c in data} | {SOURCE_LINE: F.lit(None).cast("bigint"),
                                                                  FILE_INDEX: F.lit(None).cast("int")}
        implied = implied_deletes(keys, nulls, events, table, tombstones, partitions, SEQUENCE, OPERATION,
                                  FILE_INDEX, SOURCE_FILE)
        if implied is not None:
            events = events.unionByName(implied)
    earlier_deletes = None
    if earlier:  # before the join below; known: a key the run knows (a row, a tombstone, a change)
        known = events.select(*keys) if existing is None else events.select(*keys).unionByName(existing.select(*keys))
        earlier_deletes = _earlier(keys, known.distinct(), existing, events, earlier)
    if declaration.ignore_null_updates:  # a published snapshot (a truncate too) ends what an update may take
        events = _fill_nulls(keys, data, events, table, snapshot, earlier_deletes)
    events = events.join(existing, keys, "left") if existing is not None else \
        events.withColumn(_EXISTING, F.lit(None).cast("string")).withColumn(PRESENT, F.lit(False))
    if floor is not None:  # older than the last snapshot, for a key it does not know: superseded
        events = events.where(~(F.col(_EXISTING).isNull() & (F.col(SEQUENCE) < F.lit(floor))))
    if partitions is not None and partitions.floors:  # ... and so is one older than its partition's last snapshot
        events = with_floors(events, partitions)
        events = events.where(~(F.col(_EXISTING).isNull() & (F.col(OPERATION) != DELETE)
                                & F.coalesce(F.col(SEQUENCE) < F.col("_floor"), F.lit(False)))).drop("_floor")
    if implied is None and keys_unique(changes.select(*keys), keys):  # one change per key: each is its key's newest
        events = events.withColumn("_rank", F.lit(1))
    else:
        newest = Window.partitionBy(*keys).orderBy(F.col(SEQUENCE).desc())
        events = events.withColumn("_rank", F.row_number().over(newest))
    newer = F.col(SEQUENCE) >= F.col(_EXISTING)
    if again:
        newer = F.when(F.col(FILE_INDEX).isin(list(again)), F.col(SEQUENCE) > F.col(_EXISTING)).otherwise(newer)
    wins = (F.col("_rank") == 1) & (F.col(_EXISTING).isNull() | newer)
    added = []
    if tombstones is not None and existing is not None:
        added.append(_delete_rows(declaration, _late(keys, events, tombstones), applied_at))
    if snapshot is not None and not (existing is None and snapshot.alone):
        covered = _implied(keys, existing, events, events.where(wins), snapshot)
        doomed = covered.where(F.col(ROLE) == Role.IMPLIED.value)
        events = events.join(doomed.select(*keys, F.lit(True).alias("_doomed")), keys, "left")
        wins = wins & ~(F.coalesce(F.col("_doomed"), F.lit(False)) & (F.col(SEQUENCE) < F.lit(snapshot.base)))
        added.append(_delete_rows(declaration, covered.select(
            *keys, PRESENT, ROLE, F.lit(snapshot.base).alias(SEQUENCE), F.lit(snapshot.source_file).alias(SOURCE_FILE)),
            applied_at))
    resolved = events.select(*keys, *data, OPERATION, SOURCE_FILE, SOURCE_LINE, timestamp_literal(applied_at).alias(APPLIED_AT), SEQUENCE, FILE_INDEX,
                             F.when(wins, F.lit(Role.APPLY.value)).otherwise(F.lit(Role.KEPT.value)).alias(ROLE),
                             F.coalesce(F.col(PRESENT), F.lit(False)).alias(PRESENT))
    if again:  # the history recorded every change of theirs when they were first applied: those kept stay out
        resolved = resolved.where(~(F.col(FILE_INDEX).isin(list(again)) & (F.col(ROLE) == Role.KEPT.value)))
    if earlier_deletes is not None:
        added.append(_delete_rows(declaration, earlier_deletes, applied_at))
    for rows in added:
        resolved = resolved.unionByName(rows)
    return resolved


def _fill_nulls(keys: list[str], data: list[str], events: DataFrame, table: DataFrame | None,
                snapshot: "PublishedSnapshot | None", earlier: DataFrame | None) -> DataFrame:
    """`IGNORE NULL UPDATES`: an update's NULL columns take the key's value as of the change before
    it (in sequence order: the run's earlier changes, else the table's row), never across a delete,
    a snapshot's row of the key (it says every column, NULLs too), the base of the run's published
    snapshot (a truncate's, or a full load's, which deletes the keys it does not hold; not for a key
    it protects: its row was refused, so the key keeps what it had) or the delete of any other
    snapshot of the run (`earlier`: its closing deletes, a row per key it may delete)."""
    base = None
    if table is not None:
        base = (table.join(events.select(*keys).distinct(), keys, "left_semi")
                .select(*keys, *data, F.col(SEQUENCE), F.lit(True).alias("_base")))
    marked = events.withColumn("_base", F.lit(False))
    both = marked if base is None else marked.unionByName(base, allowMissingColumns=True)
    if earlier is not None:  # each a delete: it ends the segment before it, and is dropped with the base rows
        both = both.unionByName(earlier.select(*keys, F.lit(DELETE).alias(OPERATION), SEQUENCE,
                                               F.lit(True).alias("_base")), allowMissingColumns=True)
    order = Window.partitionBy(*keys).orderBy(F.col(SEQUENCE)).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ended = F.sum(F.when(F.col(OPERATION).isin(DELETE, SNAPSHOT_OPERATION), 1).otherwise(0)).over(order)
    if snapshot is not None:
        after = F.col(SEQUENCE) > F.lit(snapshot.base)
        if snapshot.protected is not None:
            both = both.join(snapshot.protected.select(*keys).distinct().withColumn("_protected", F.lit(True)),
                             keys, "left")
            after = after & F.col("_protected").isNull()
        ended = ended + F.when(after, 1).otherwise(0)
    both = both.withColumn("_segment", ended)
    within = Window.partitionBy(*keys, "_segment").orderBy(F.col(SEQUENCE)) \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    update = F.col(OPERATION).isin("I", "U")
    filled = both.select(*[F.when(update, F.last(F.col(c), ignorenulls=True).over(within)).otherwise(F.col(c)).alias(c)
                           if c in data else F.col(c) for c in both.columns])
    return filled.where(~F.col("_base")).drop("_base", "_segment", "_protected")


def _existing(keys: list[str], table: DataFrame | None, tombstones: DataFrame | None) -> DataFrame | None:
    """(keys, `_existing`, `_present`): per key, the newest sequence of its row and its tombstone,
    and whether the table holds a row of it."""
    parts = []
    if table is not None:
        parts.append(table.select(*keys, F.coalesce(F.col(SEQUENCE), F.lit("")).alias(_EXISTING),
                                  F.lit(True).alias(PRESENT)))
    if tombstones is not None:
        parts.append(tombstones.select(*keys, F.col(SEQUENCE).alias(_EXISTING), F.lit(False).alias(PRESENT)))
    if not parts:
        return None
    if len(parts) == 1 and tombstones is None:  # the table's keys are distinct: nothing to group
        return parts[0]
    both = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    return both.groupBy(*keys).agg(F.max(_EXISTING).alias(_EXISTING), F.max(PRESENT).alias(PRESENT))


def _implied(keys: list[str], existing: DataFrame | None, events: DataFrame, winners: DataFrame,
             snapshot: PublishedSnapshot) -> DataFrame:
    """(keys, `_present`, `_role`) of every key the snapshot covers: the run knows it (a row, a
    tombstone, a change), it is outside the snapshot (its rows' keys) and not protected. `implied`:
    the snapshot deletes it, its newest change (row, tombstone, this run's winner) being not newer
    than its base (a key whose newest is the snapshot's own tombstone (a rerun) is deleted again:
    ties re-apply); `closing` (not present: no commit) for the others, which a newer change keeps."""
    inside = events.where(F.col(FILE_INDEX).isin(snapshot.files)).select(*keys)
    if snapshot.protected is not None:
        inside = inside.unionByName(snapshot.protected.select(*keys))
    pool = winners.select(*keys, F.col(SEQUENCE).alias(_EXISTING), F.lit(False).alias(PRESENT))
    if existing is not None:
        pool = existing.select(*keys, _EXISTING, PRESENT).unionByName(pool)
    newest = pool.join(inside.distinct(), keys, "left_anti").groupBy(*keys) \
        .agg(F.max(_EXISTING).alias(_EXISTING), F.max(PRESENT).alias(PRESENT))
    doomed = F.col(_EXISTING) <= F.lit(snapshot.base)
    return newest.select(*keys, (doomed & F.col(PRESENT)).alias(PRESENT),
                         F.when(doomed, F.lit(Role.IMPLIED.value)).otherwise(F.lit(Role.CLOSING.value)).alias(ROLE))


def _earlier(keys: list[str], known: DataFrame, existing: DataFrame | None, events: DataFrame,
             earlier: Sequence[PublishedSnapshot]) -> DataFrame:
    """(keys, `_present`, `_role`, `_sequence`, `_source_file`): a `closing` delete at the base of
    each of the run's `earlier` snapshots for every key it does not hold that may have been live just
    before it (history.closes keeps those that end a live version): for a full load, every key the
    run knows (`known`) that is neither in it nor protected by it; for a truncate, every key, except
    right after another truncate, which deleted every key: then a key can be live only if a version
    of it starts between the two, a change of the run there (or a stored version, if the table or
    its tombstones hold a sequence newer than the truncate before: then again every key). Each
    truncate costs the keys it may close, not the table's."""
    ordered = sorted(earlier, key=lambda s: s.base)
    stored = None  # the newest sequence of the table and its tombstones: read only for a truncate after a truncate
    if existing is not None and any(a.truncate and b.truncate for a, b in zip(ordered, ordered[1:])):
        newest = existing.agg(F.max(_EXISTING)).first()
        stored = None if newest is None else newest[0]
    wide, narrow, loads = [], [], []
    for before, each in zip([None, *ordered], ordered):
        if not each.truncate:
            loads.append(each)
        elif before is None or not before.truncate or (stored is not None and stored > before.base):
            wide.append(each)
        else:
            narrow.append((before, each))

    def stamped(base: SparkColumn, source_file: SparkColumn) -> list[SparkColumn]:
        return [F.lit(False).alias(PRESENT), F.lit(Role.CLOSING.value).alias(ROLE), base.alias(SEQUENCE),
                source_file.alias(SOURCE_FILE)]

    def structs(chosen: list[PublishedSnapshot], after: list[str | None]) -> SparkColumn:
        return F.array(*[F.struct(F.lit(s.base).alias("s"), F.lit(s.source_file).alias("f"),
                                  F.lit(a).cast("string").alias("after")) for s, a in zip(chosen, after)])

    parts = []
    if wide:  # one row per key and truncate: an explode, not a union per truncate
        parts.append(known.select(*keys, F.explode(structs(wide, [None] * len(wide))).alias("_t"))
                     .select(*keys, *stamped(F.col("_t.s"), F.col("_t.f"))))
    if narrow:
        within = events.select(*keys, SEQUENCE, F.explode(structs([s for _, s in narrow],
                                                                  [b.base for b, _ in narrow])).alias("_t"))
        # a change at a truncate's own sequence comes after it (history.closes: a delete closes only older rows)
        within = within.where((F.col(SEQUENCE) >= F.col("_t.after")) & (F.col(SEQUENCE) < F.col("_t.s")))
        parts.append(within.select(*keys, *stamped(F.col("_t.s"), F.col("_t.f"))).distinct())
    for load in loads:  # a few full loads at most: each its own
        outside = known.join(events.where(F.col(FILE_INDEX).isin(load.files)).select(*keys).distinct(), keys,
                             "left_anti")
        if load.protected is not None:
            outside = outside.join(load.protected.select(*keys).distinct(), keys, "left_anti")
        parts.append(outside.select(*keys, *stamped(F.lit(load.base), F.lit(load.source_file))))
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    return rows


def _late(keys: list[str], events: DataFrame, tombstones: DataFrame) -> DataFrame:
    """(keys, `_present`, `_role`, `_sequence`, `_source_file`, `_source_line`): a `closing` delete at
    the tombstone of each key the table does not hold that has a change in the run older than its
    tombstone, from the object and line of the delete it remembers."""
    late = events.where(~F.coalesce(F.col(PRESENT), F.lit(False)) & (F.col(SEQUENCE) < F.col(_EXISTING))) \
        .select(*keys).distinct()
    return tombstones.join(late, keys, "left_semi").select(
        *keys, F.lit(False).alias(PRESENT), F.lit(Role.CLOSING.value).alias(ROLE), SEQUENCE,
        F.col("source_file").alias(SOURCE_FILE), F.col("source_line").alias(SOURCE_LINE))


def _delete_rows(declaration: TableDeclaration, deletes: DataFrame, applied_at: dt.datetime) -> DataFrame:
    """`deletes` (keys, `_present`, `_role`, `_sequence`, `_source_file`, and `_source_line` when
    the delete has one) as resolved rows: the key, `D` at the sequence, nothing else."""
    keys = list(declaration.keys)
    types = {c.name: c.type for c in declaration.columns}
    return deletes.select(
        *keys, *[F.lit(None).cast(types[c]).alias(c) for c in declaration.contract.names if c not in keys],
        F.lit(DELETE).alias(OPERATION), F.col(SOURCE_FILE),
        (F.col(SOURCE_LINE) if SOURCE_LINE in deletes.columns else F.lit(None)).cast("bigint").alias(SOURCE_LINE),
        timestamp_literal(applied_at).alias(APPLIED_AT), F.col(SEQUENCE).cast("string").alias(SEQUENCE),
        F.lit(None).cast("int").alias(FILE_INDEX), F.col(ROLE), F.col(PRESENT))


def in_commit() -> SparkColumn:
    """The resolved rows the table commit writes: the winners, and the implied deletes of present keys."""
    return (F.col(ROLE) == Role.APPLY.value) | ((F.col(ROLE) == Role.IMPLIED.value) & F.col(PRESENT))


def deletes() -> SparkColumn:
    """The resolved rows that leave a tombstone: deletes that won, and every implied delete."""
    return ((F.col(ROLE) == Role.APPLY.value) & (F.col(OPERATION) == DELETE)) | (F.col(ROLE) == Role.IMPLIED.value)


def recorded_changes() -> SparkColumn:
    """The resolved rows the SCD2 history records as they are: every change the run kept."""
    return F.col(ROLE).isin(Role.APPLY.value, Role.KEPT.value)


def closing() -> SparkColumn:
    """The resolved rows the SCD2 history records only where they end a live version: the
    snapshot's deletes and the tombstones' that close a late change (history.record)."""
    return F.col(ROLE).isin(Role.IMPLIED.value, Role.CLOSING.value)
