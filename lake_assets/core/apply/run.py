"""One run of the change core for one declared table: apply everything pending.

Data flows one way, and every row-level step runs on the engine:

    raw objects -> read (reader.py: fetch, layout, tolerant parse, validate; staged once)
    -> quarantine (refused rows) -> snapshot guards -> resolve per key (resolve.py; staged once)
    -> ONE table commit (curated.py: Delta by commit.py, Iceberg by curated_iceberg.py)
    -> change feed (Delta), tombstones, SCD2 history -> ledger

The orchestrator lists objects, plans (plan.py: deliveries, sequences, snapshot groups), asks
the engine for per-object and per-snapshot counts, decides holds, submits the writes and
records the ledger; it never holds a row. The caller holds the table's write lease.

Convergence: the quarantine inserts only absent rows; the table commit is idempotent (a change
equal to its key's sequence re-applies); just before it the run records its manifest in its
stage (stage.py), so a run killed after its commit is finished by the next run from its staged
change set and the version it found (the same feed, tombstones and history rows, and its
ledger entries recorded at its commit); killed before, its objects are still pending. The
ledger is written last.
"""

import datetime as dt
import os
import time
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lake_assets.core.apply import bookkeeping, expectations, feed, history
from lake_assets.core.apply.cluster import file_cuts
from lake_assets.core.apply.curated import Curated, Target, open_curated
from lake_assets.core.apply.partitions import FolderPartition, PartitionSnapshot, PartitionSnapshots, \
    folder_partition, in_partitions, partition_key, partition_text
from lake_assets.core.apply.plan import LEDGER_KIND, Plan, PlannedFile, pending, plan, raw_files, \
    refused_by_older_contract, refused_by_place_now_named
from lake_assets.core.apply.reader import FILE_INDEX, KIND, OBJECT_COLUMNS, REASON, SEQUENCE, SOURCE_FILE, RowKind, \
    output_schema, reader, spark_schema
from lake_assets.core.apply.resolve import AUDIT_TYPES, PRESENT, ROLE, PublishedSnapshot, Role, closing, deletes, in_commit, \
    recorded_changes, resolve, table_columns
from lake_assets.core.apply.stage import Manifest, Stage
from lake_assets.core.apply.validate import OPERATION, TRUNCATE
from lake_assets.core.change_feed import FeedReport
from lake_assets.core.column_descriptions import AUDIT_DESCRIPTIONS
from lake_assets.core.declaration import RefusalReason, SourceKind, TableDeclaration
from lake_assets.core.dms import DmsLayout
from lake_assets.core.formats.delta import file_ranges, open_table
from lake_assets.core.formats.delta_as_of import replaced_rows
from lake_assets.core.ledger import APPLIED, HELD, REJECTED, Ledger, LedgerEntry
from lake_assets.core.snapshot_guard import Audit, SnapshotGuard
from lake_assets.core.tables import TableFormat, TableSet, table_set
from lake_assets.resources.storage import LakeStorage
from lake_assets.settings import RulesSettings



@dataclass(frozen=True)
class IngestRules:
    """The rules that shape ingestion (the `LakeRules` resource, fed from settings.py; None: the
    declaration's own)."""

    dms: DmsLayout = DmsLayout()
    max_shrink: float | None = None
    tombstone_retention: dt.timedelta | None = None

    @classmethod
    def from_rules(cls, rules: "RulesSettings") -> "IngestRules":
        retention = rules.tombstone_retention_days
        return cls(rules.dms(), rules.fullload_max_shrink,
                   dt.timedelta(days=retention) if retention is not None else None)


@dataclass
class Commit:
    version: int
    operation: str
    inserted: int
    updated: int
    deleted: int
    rows_after: int
    strategy: str = ""


@dataclass
class DerivedReport:
    feed: FeedReport = field(default_factory=FeedReport)
    history_version: int | None = None
    history_changes: int = 0


@dataclass
class ApplyReport:
    run_id: str
    version_before: int | None
    rows_before: int
    version_after: int | None = None
    rows_after: int = 0
    commits: list[Commit] = field(default_factory=list)
    files: list[LedgerEntry] = field(default_factory=list)
    duration_seconds: float = 0.0
    derived: DerivedReport = field(default_factory=DerivedReport)
    #: failing rows per expectation among the rows the run read (core/apply/expectations.py)
    expectations: dict[str, int] = field(default_factory=dict)
    #: rows the run quarantined, per refusal reason (counted on the engine)
    quarantined_by_reason: dict[str, int] = field(default_factory=dict)

    def total(self, attribute: str) -> int:
        return sum(getattr(c, attribute) for c in self.commits)

    def file_total(self, attribute: str) -> int:
        return sum(getattr(f, attribute) for f in self.files)

    @property
    def held(self) -> list[LedgerEntry]:
        return [f for f in self.files if f.status == HELD]


@dataclass
class _Run:
    """What one run works with."""

    declaration: TableDeclaration
    tables: TableSet
    storage: LakeStorage
    spark: SparkSession
    run_id: str
    rules: IngestRules
    report: ApplyReport
    #: applied snapshot objects this run loads again, as of their stamps (`lake backfill`)
    reload: frozenset[str] = frozenset()

    @property
    def keys(self) -> list[str]:
        return list(self.declaration.keys)

    @property
    def columns(self) -> list[str]:
        return table_columns(self.declaration)

    @property
    def integer_key(self) -> bool:
        return self.declaration.column(self.declaration.keys[0]).is_integer

    @property
    def target(self) -> Target:
        key_type = self.declaration.column(self.keys[0]).type
        return Target(self.columns, self.keys, self.integer_key, "int" if key_type == "INT" else "bigint",
                      self.declaration.partition_by)

    def curated(self) -> Curated:
        """The table as it is now."""
        return open_curated(self.declaration, self.storage, self.tables.table, self.target)

    @property
    def tracking(self) -> history.Tracking:
        """How the table's history is kept (`track_history`, and whether its sequences are times)."""
        declared = self.declaration
        tracked = None
        if declared.track_history is not None or declared.track_history_except:
            tracked = tuple(declared.tracked)
        return history.Tracking(tracked, declared.timed)


def apply_pending(declaration: TableDeclaration, storage: LakeStorage, spark: SparkSession, run_id: str,
                  rules: IngestRules | None = None, reapply: bool = False,
                  reload: Collection[str] = ()) -> ApplyReport:
    """Apply what is pending for `declaration`'s table; with `reapply`, also the objects `lake
    restore` reverted; and the applied snapshot objects `reload` names, again, as of the stamps
    they were applied with (`lake backfill`: a newer change of a key wins over them, so a reload
    repairs what the table lost and undoes nothing since). A run stopped after its table commit
    is finished first."""
    started = time.perf_counter()
    tables = table_set(declaration)
    run = _Run(declaration, tables, storage, spark, run_id, rules or IngestRules(), ApplyReport(run_id, None, 0),
               frozenset(reload))
    before = run.curated()
    run.report.version_before, run.report.rows_before = before.version, before.rows
    ledger = Ledger(storage)
    _finish_stopped(run, ledger)
    if tables.table.feed:
        caught_up = feed.catch_up(spark, storage, tables.table, tables.changes, run.keys)
        run.report.derived.feed = run.report.derived.feed.add(caught_up)
    before = run.curated()
    _evolve(run, before)
    found = before.read(spark) if declaration.history else None  # read only for a history to check
    # a history an earlier release wrote on the commit axis
    if found is not None and before.version is not None:
        history.start_over(tables.history.uri(storage), open_table(storage, tables.history), found, run.keys,
                           run.columns, before.version, run.tracking)
    entries = ledger.entries(declaration.table_name)
    latest = {(e["source_file"], e["source_etag"]): e for e in entries.to_pylist()}
    todo = pending(declaration, raw_files(declaration, storage), latest, reapply, reload)
    if todo:
        _apply(run, ledger, plan(declaration, todo, entries, run.rules.dms, reload), before, latest)
    last = run.report.commits[-1] if run.report.commits else None
    run.report.version_after = last.version if last else run.report.version_before
    run.report.rows_after = last.rows_after if last else run.report.rows_before
    run.report.duration_seconds = time.perf_counter() - started
    return run.report


# --- the run --------------------------------------------------------------------------------------

@dataclass
class _Snapshot:
    """The pending parts of one full load, with what the engine counted of them."""

    parts: list[PlannedFile]
    summaries: dict[int, dict]
    held: str | None = None

    @property
    def floor(self) -> str:
        return self.parts[0].floor or ""  # set for every part by plan.py

    @property
    def readable(self) -> list[PlannedFile]:
        return [p for p in self.parts if not self.summaries[p.index]["_refusal"]]

    @property
    def rows(self) -> int:
        return sum(self.summaries[p.index]["_valid"] for p in self.readable)

    @property
    def refused(self) -> int:
        return sum(self.summaries[p.index]["_refused"] for p in self.parts)

    @property
    def approved(self) -> bool:
        return any(p.approved is not None for p in self.parts)


def _apply(run: _Run, ledger: Ledger, planned: Plan, before: Curated, latest: dict) -> None:
    spark, storage, tables = run.spark, run.storage, run.tables
    stage = Stage(storage, run.declaration.table_name, run.run_id)
    applied_at = dt.datetime.now(dt.timezone.utc)
    try:
        parsed = stage.write("parsed", read_objects(spark, run.declaration, run.rules.dms, storage,
                                                    [f.to_read() for f in planned.files]))
        summaries = {int(r[FILE_INDEX]): r.asDict() for r in parsed.where(F.col(KIND) == RowKind.FILE.value)
                     .select(FILE_INDEX, "_etag", "_size", "_records", "_valid", "_refused", "_refusal").collect()}
        judged = expectations.judge(run.declaration, parsed) if run.declaration.expectations else None
        if judged is not None:
            run.report.expectations = judged.failed
            for index, count in judged.dropped_per_file.items():  # quarantined: no longer valid
                summaries[index]["_valid"] -= count
                summaries[index]["_refused"] += count
        # files refused before and read again now: their refusal's quarantined rows go (read again below)
        for reason, again in ((RefusalReason.UNDECLARED_COLUMN, refused_by_older_contract),
                              (RefusalReason.WRONG_PARTITION, refused_by_place_now_named)):
            released = [(f.file.key, f.file.etag) for f in planned.files if (f.file.key, f.file.etag) in latest
                        and again(run.declaration, latest[(f.file.key, f.file.etag)])]
            bookkeeping.release(spark, storage, tables.quarantine, reason.value, released)
        etags = spark.createDataFrame([(i, s["_etag"]) for i, s in summaries.items()], "_file INT, _etag STRING")
        refusals = parsed.where(F.col(KIND) == RowKind.REFUSAL.value)
        if judged is not None and judged.dropped is not None:
            refusals = refusals.unionByName(judged.dropped.select(*refusals.columns))
        if any(s["_refused"] for s in summaries.values()):
            bookkeeping.quarantine(storage, tables.quarantine, refusals, etags, run.run_id, applied_at)
            run.report.quarantined_by_reason = {
                str(r[0]): int(r[1]) for r in refusals.groupBy(REASON).count().collect()}  # a few rows
        declared = run.declaration.tombstone_retention_days
        retention = run.rules.tombstone_retention if run.rules.tombstone_retention is not None else \
            None if declared is None else dt.timedelta(days=declared)
        if retention is not None:  # none: the table keeps its deletes for good
            bookkeeping.prune_tombstones(spark, storage, tables.tombstones, applied_at - retention)

        found = before.read(spark)
        snapshots = [_Snapshot(parts, summaries) for parts in planned.snapshots.values()]
        if run.declaration.partition_snapshots is not None:
            _guard_partitions(run, snapshots, parsed, found)
        for snapshot in snapshots:
            if not snapshot.approved and run.declaration.partition_snapshots is None:
                snapshot.held = _guard(run, snapshot, parsed, found, before)
        published = sorted((s for s in snapshots if s.held is None), key=lambda s: s.floor)
        sources = [f.index for f in planned.changes if not summaries[f.index]["_refusal"]]
        sources += [p.index for s in published for p in s.readable]
        partitions = None
        if run.declaration.partition_snapshots is not None:  # snapshots of one partition each: none of the table
            partitions = _partition_snapshots(run, published, refusals, planned, sources)
            published = []
        newest = published[-1] if published else None
        changes = parsed.where((F.col(KIND) == RowKind.ROW.value) & F.col(FILE_INDEX).isin(sources))
        if judged is not None:
            changes = expectations.kept(changes, judged)
        truncated = _truncate(changes) if any(s.truncate for s in run.declaration.sources) else None
        if truncated is not None:
            changes = changes.where(F.col(OPERATION) != TRUNCATE)
        # every published snapshot (full loads, truncates) deletes as of its base; the newest is the
        # one the table takes, the others (older) close versions in the history only
        truncates = list(truncated.all) if truncated is not None else []
        # by base; at one base a full load is the newer (it says which keys stay)
        each = sorted([*truncates, *(_published(run.keys, s, refusals, sources) for s in published)],
                      key=lambda s: (s.base, not s.truncate))
        published_snapshot = each.pop() if each else None
        tombstones = bookkeeping.tombstones(spark, storage, tables.tombstones)
        resolved = stage.write("resolved", resolve(
            run.declaration, changes, found,
            None if tombstones is None else tombstones.select(*run.keys, SEQUENCE, "source_file", "source_line"),
            planned.floor, published_snapshot, applied_at, each, partitions,
            again=[f.index for f in planned.files if f.file.key in run.reload]))
        applied = {int(r[FILE_INDEX]): int(r["n"]) for r in resolved.where(F.col(ROLE) == Role.APPLY.value)
                   .groupBy(FILE_INDEX).agg(F.count(F.lit(1)).alias("n")).collect()
                   if r[FILE_INDEX] is not None}  # a partition snapshot's deletes are no object's rows
        if truncated is not None and published_snapshot is not None and published_snapshot.truncate:
            for index, count in truncated.rows.items():  # the newest is a truncate: they took effect, applied
                applied[index] = applied.get(index, 0) + count
        counts = _commit_counts(resolved)
        entries = _entries(run, planned, summaries, snapshots, newest, sources, applied, applied_at)
        operation = "full load" if newest is not None else \
            "partition load" if partitions is not None and partitions.published else "merge"
        version_before = before.version
        committed = None
        batch = resolved.where(in_commit())
        if sum(counts) or _any(batch):
            how = before.plan(spark, batch, *counts)
            label = f"{operation} ({how.name})"
            stage.record(Manifest(run.run_id, applied_at, version_before, label, entries,
                                  [planned.files[i].file.key for i in sources]))
            before.commit(spark, batch, how, label)
            after = before.reopened()
            assert after.version is not None  # just committed
            committed = after.version
            run.report.commits.append(Commit(committed, operation, *counts, after.rows, how.name))
        _after_commit(run, resolved, version_before, committed, applied_at)
        recorded = _versioned(entries, sources, committed)
        ledger.record(recorded)
        run.report.files += recorded
    except BaseException as error:
        _clear(run, stage, error)
        raise
    stage.clear()


@dataclass(frozen=True)
class _Truncates:
    """The run's truncates (`APPLY AS TRUNCATE`), each a snapshot of no rows at its sequence (one per
    sequence); `rows`: the truncate rows per file."""

    all: tuple[PublishedSnapshot, ...]
    rows: dict[int, int]


def _truncate(changes: DataFrame) -> _Truncates | None:
    """The run's truncates among `changes` (one small aggregate), or None."""
    found = changes.where(F.col(OPERATION) == TRUNCATE).groupBy(FILE_INDEX, SOURCE_FILE, SEQUENCE) \
        .agg(F.count(F.lit(1)).alias("n")).collect()
    if not found:
        return None
    rows: dict[int, int] = {}
    each: dict[str, PublishedSnapshot] = {}
    for row in sorted(found, key=lambda r: (r[SEQUENCE], r[FILE_INDEX])):
        rows[int(row[FILE_INDEX])] = rows.get(int(row[FILE_INDEX]), 0) + int(row["n"])
        each.setdefault(row[SEQUENCE], PublishedSnapshot(row[SEQUENCE], [], None, row[SOURCE_FILE], truncate=True))
    return _Truncates(tuple(each.values()), rows)


def _published(keys: list[str], snapshot: _Snapshot, refusals: DataFrame, sources: list[int]) -> PublishedSnapshot:
    """A full load the run publishes: its base, its readable parts, and the keys of its refused rows
    (protected: they keep their current row)."""
    readable = [p.index for p in snapshot.readable]
    return PublishedSnapshot(snapshot.floor, readable, _protected(keys, snapshot, refusals),
                             snapshot.parts[0].file.key, alone=set(sources) <= set(readable))


def _protected(keys: list[str], snapshot: _Snapshot, refusals: DataFrame) -> DataFrame | None:
    """The keys of a snapshot's refused rows whose key fields are well formed (None: none refused)."""
    if not snapshot.refused:
        return None
    protected = refusals.where(F.col(FILE_INDEX).isin([p.index for p in snapshot.parts]))
    for key in keys:
        protected = protected.where(F.col(key).isNotNull())
    return protected.select(*keys)


def _partition(run: _Run, snapshot: _Snapshot) -> FolderPartition:
    """The partition a partition snapshot replaces (its parts lie in one folder)."""
    key = snapshot.parts[0].file.key
    source = run.declaration.source(key)
    assert source is not None
    partition = folder_partition(run.declaration, source, key)
    assert isinstance(partition, FolderPartition)  # an object in no partition's folder is refused whole
    return partition


def _partition_snapshots(run: _Run, published: list[_Snapshot], refusals: DataFrame, planned: Plan,
                         sources: list[int]) -> PartitionSnapshots:
    """The run's published partition snapshots (oldest first), and each partition's floor before the run."""
    column = run.declaration.partition_snapshots
    assert column is not None
    each = [PartitionSnapshot(_partition(run, s).value, s.floor, [p.index for p in s.readable],
                              _protected(run.keys, s, refusals), s.parts[0].file.key)
            for s in published if s.readable]  # one refused whole (by its place, say) replaces nothing
    readable = {p.index for s in published for p in s.readable}
    return PartitionSnapshots(column, each, planned.partition_floors,
                              alone=set(sources) <= readable)


def _guard_partitions(run: _Run, snapshots: list[_Snapshot], parsed: DataFrame, found: DataFrame | None) -> None:
    """Hold the partition snapshots the shared guard holds (core/snapshot_guard.py), each judged
    against its partition: empty, with refused rows, or shrinking it by more than the table's
    `max_shrink` (the partition keeps the snapshot's keys and those changed after it). Two queries
    on the engine for all of them: each partition's rows, and what each would keep."""
    waiting = [(s, _partition(run, s)) for s in snapshots if not s.approved and s.readable]
    if not waiting:
        return
    column = run.declaration.partition_snapshots
    assert column is not None
    rows_before: dict[str, int] = {}
    scoped = None
    if found is not None:  # only the rows of the snapshots' partitions are read
        scoped = found.where(in_partitions(column, [p.value for _, p in waiting])) \
            .withColumn("_pk", partition_key(F.col(column)))
        rows_before = {r[0]: int(r[1]) for r in scoped.groupBy("_pk").count().collect()}
    judged = [i for i, (s, p) in enumerate(waiting)
              if rows_before.get(partition_text(p.value)) and s.rows and not s.refused]
    after: dict[int, int] = {}
    if judged and scoped is not None:
        spark = run.spark
        members = spark.createDataFrame([(part.index, i) for i in judged for part in waiting[i][0].readable],
                                        "_part INT, _snap INT")
        bases = spark.createDataFrame([(i, partition_text(waiting[i][1].value), waiting[i][0].floor) for i in judged],
                                      "_snap INT, _pk STRING, _base STRING")
        inside = parsed.where(F.col(KIND) == RowKind.ROW.value) \
            .join(F.broadcast(members), F.col(FILE_INDEX) == F.col("_part")).select(*run.keys, "_snap")
        newer = scoped.join(F.broadcast(bases), "_pk") \
            .where(F.coalesce(F.col(SEQUENCE), F.lit("")) >= F.col("_base")).select(*run.keys, "_snap")
        after = {int(r[0]): int(r[1]) for r in inside.unionByName(newer).distinct().groupBy("_snap").count().collect()}
    rules = run.declaration.guard
    max_shrink = run.rules.max_shrink if run.rules.max_shrink is not None else rules.max_shrink
    guard = SnapshotGuard(max_shrink, hold_rejected=rules.hold_rejected)
    for i, (snapshot, partition) in enumerate(waiting):
        snapshot.held = guard.hold(Audit(f"the partition {partition.folder}", snapshot.rows, snapshot.refused,
                                         rows_before.get(partition_text(partition.value), 0),
                                         after.get(i, snapshot.rows)))


def read_objects(spark: SparkSession, declaration: TableDeclaration, dms: DmsLayout, storage: LakeStorage,
                 objects) -> DataFrame:
    """The engine's reading of `objects` (reader.ObjectToRead), one task per few objects."""
    rows = [(o.index, o.key, o.kind.value, o.prefix, o.refusal, o.size) for o in objects]
    frame = spark.createDataFrame(rows, OBJECT_COLUMNS)
    parallelism = max(1, min(len(rows), os.cpu_count() or 1))
    if parallelism > 1:
        frame = frame.repartition(parallelism)
    function = reader(declaration, dms, storage.endpoint_url, storage.bucket, storage.region)
    return frame.mapInArrow(function, spark_schema(output_schema(declaration)))


def _guard(run: _Run, snapshot: _Snapshot, parsed: DataFrame, found: DataFrame | None,
           before: Curated) -> str | None:
    """Why a snapshot is held for `lake approve` (None: it publishes), by the shared guard
    (core/snapshot_guard.py): its scope is the whole table, which keeps, once it is published, the
    snapshot's keys and the keys changed after it (counted on the engine)."""
    rules = run.declaration.guard
    max_shrink = run.rules.max_shrink if run.rules.max_shrink is not None else rules.max_shrink
    rows_before = before.rows
    after = snapshot.rows
    if rows_before and snapshot.rows and not snapshot.refused and found is not None:
        inside = parsed.where((F.col(KIND) == RowKind.ROW.value) &
                              F.col(FILE_INDEX).isin([p.index for p in snapshot.readable])).select(*run.keys)
        newer = found.where(F.coalesce(F.col(SEQUENCE), F.lit("")) >= F.lit(snapshot.floor)).select(*run.keys)
        after = int(inside.unionByName(newer).distinct().count())
    guard = SnapshotGuard(max_shrink, hold_rejected=rules.hold_rejected)
    return guard.hold(Audit("the table", snapshot.rows, snapshot.refused, rows_before, after))


def _commit_counts(resolved: DataFrame) -> tuple[int, int, int]:
    """(inserted, updated, deleted) of the commit."""
    commit_rows = resolved.where(in_commit())
    upsert = F.col(OPERATION) != "D"
    row = commit_rows.agg(
        F.sum(F.when(upsert & ~F.col(PRESENT), 1).otherwise(0)).alias("i"),
        F.sum(F.when(upsert & F.col(PRESENT), 1).otherwise(0)).alias("u"),
        F.sum(F.when(~upsert & F.col(PRESENT), 1).otherwise(0)).alias("d")).collect()[0]
    return int(row["i"] or 0), int(row["u"] or 0), int(row["d"] or 0)


def _any(frame: DataFrame) -> bool:
    return bool(frame.limit(1).count())


def _table_cuts(run: _Run) -> list[int]:
    """Where the Delta table's files begin, by their key ranges in its log (none for an Iceberg
    table or a key that is not an integer)."""
    delta = run.tables.table.format is TableFormat.DELTA
    table = open_table(run.storage, run.tables.table) if run.integer_key and delta else None
    return [] if table is None else file_cuts(*file_ranges(table, run.keys[0])[:2])


def _after_commit(run: _Run, resolved: DataFrame, version_before: int | None, committed: int | None,
                  applied_at: dt.datetime) -> None:
    """The change feed, tombstones and SCD2 history of the run's commit, from its resolved changes.

    The rows the commit replaced are read from the data files it removed (its log entry names
    them), not from the table as of `version_before`: those files hold every row of a key it
    touched, and Sail 0.7.2 cannot time-travel to most versions older than a checkpoint it wrote
    (one every 10 commits: `versionAsOf` 9 fails once version 10 exists)."""
    spark, storage, tables = run.spark, run.storage, run.tables
    if committed is not None and tables.table.feed:  # Delta; an Iceberg table's feed is read from its snapshots
        commit_rows = resolved.where(in_commit())
        added = commit_rows.where(F.col(OPERATION) != "D").select(*run.columns)
        if version_before is None:
            removed = spark.createDataFrame([], added.schema)
        else:
            replaced = replaced_rows(spark, storage, tables.table, committed)
            present = commit_rows.where(F.col(PRESENT)).select(*run.keys)
            removed = replaced.join(present, run.keys, "left_semi")
        written = feed.write_version(spark, storage, tables.table, tables.changes, run.keys, run.columns,
                                     removed, added, committed, first_commit=version_before is None)
        run.report.derived.feed = run.report.derived.feed.add(written)
    doomed = resolved.where(deletes())
    if _any(doomed):
        bookkeeping.record_tombstones(spark, storage, tables.tombstones, run.declaration.key_types, doomed, applied_at)
    if run.declaration.history:
        left = committed if committed is not None else \
            (run.report.commits[-1].version if run.report.commits else version_before)
        found = open_table(storage, tables.history)
        recorded = history.record(spark, tables.history.uri(storage), found, resolved.where(recorded_changes()),
                                  run.keys, run.columns, run.integer_key, left, run.target.key_type,
                                  run.tracking, closing=resolved.where(closing()),
                                  first_cuts=_table_cuts(run) if found is None else ())
        stored = open_table(storage, tables.history)
        if recorded and stored is not None:
            run.report.derived.history_version = stored.version()
            run.report.derived.history_changes += recorded


def _entries(run: _Run, planned: Plan, summaries: dict[int, dict], snapshots: list[_Snapshot],
             newest: _Snapshot | None, sources: list[int], applied: dict[int, int],
             at: dt.datetime) -> list[LedgerEntry]:
    """One ledger entry per object read (the table version is filled in once committed)."""
    held = {p.index: s.held for s in snapshots if s.held is not None for p in s.parts}
    entries = []
    for entry in planned.files:
        summary = summaries[entry.index]
        refusal = summary["_refusal"]
        valid, refused = summary["_valid"], summary["_refused"]
        if refusal:
            status = REJECTED
        elif entry.index in held:
            status = HELD
        elif entry.file.kind is SourceKind.SNAPSHOT:
            status = APPLIED  # a published snapshot: with no valid row it still deleted every older key
        else:
            status = REJECTED if valid == 0 and refused else APPLIED
        waiting = status == HELD
        superseded = 0 if waiting or refusal else valid - applied.get(entry.index, 0)
        sequence = None
        if entry.stamp is not None:
            sequence = entry.floor if entry.file.kind is SourceKind.SNAPSHOT else entry.stamp.base(entry.delivery)
        entries.append(LedgerEntry(
            table_name=run.declaration.table_name, source_file=entry.file.key,
            source_etag=summary["_etag"] or entry.file.etag, source_size=summary["_size"] or entry.file.size,
            source_kind=LEDGER_KIND[entry.file.kind], status=status, rows_in_file=summary["_records"],
            rows_applied=0 if waiting or refusal else valid - superseded, rows_superseded=superseded,
            rows_quarantined=refused, table_version=None, run_id=run.run_id, recorded_at=at,
            detail=refusal if refusal else held.get(entry.index), source_sequence=sequence))
    return entries


def _versioned(entries: list[LedgerEntry], sources: list[int], committed: int | None) -> list[LedgerEntry]:
    """The entries with the commit's version on the objects it applied."""
    return entries if committed is None else [replace(e, table_version=committed) if i in sources else e
                                              for i, e in enumerate(entries)]


def _clear(run: _Run, stage: Stage, error: BaseException) -> None:
    """Remove a failed run's stage, unless its commit landed (the next run finishes it from there).
    While another error is on its way out, a failing cleanup (S3 down) must not replace it."""
    try:
        manifest = stage.manifest()
        if manifest is None or _committed(run, manifest) is None:
            stage.clear()
    except Exception as cleanup_error:  # noqa: BLE001 -- noted on the error that is already leaving
        error.add_note(f"also, the staged run {stage.prefix} could not be removed: {cleanup_error}")


# --- a run stopped after its commit --------------------------------------------------------------

def _finish_stopped(run: _Run, ledger: Ledger) -> None:
    """Finish every run of this table that committed and was stopped before its ledger write; clear
    the stages of runs that never committed (their objects are still pending)."""
    recorded = None
    # an Iceberg table's runs staged under its bare name (`orders`) before it had one name (`shop.orders`)
    names = dict.fromkeys((run.declaration.table_name, run.declaration.name))
    for stage in [stage for name in names for stage in Stage.left_behind(run.storage, name)]:
        manifest = stage.manifest()
        if manifest is None:
            stage.clear()
            continue
        if recorded is None:
            recorded = set(ledger.entries(run.declaration.table_name)["run_id"].to_pylist())
        committed = None if manifest.run_id in recorded else _committed(run, manifest)
        if committed is not None:
            resolved = stage.read(run.spark, "resolved")
            _after_commit(run, resolved, manifest.version_before, committed, manifest.applied_at)
            committing_files = set(manifest.committing)
            finished = [replace(e, table_version=committed) if e.source_file in committing_files else e
                        for e in manifest.entries]
            ledger.record(finished)
            run.report.files += finished
        stage.clear()


def _committed(run: _Run, manifest: Manifest) -> int | None:
    """The version of the manifest's commit, if it was made, else None."""
    return run.curated().committed(manifest.version_before, manifest.label)


# --- contract evolution ------------------------------------------------------------------------

def _evolve(run: _Run, table: Curated) -> None:
    """Add the columns of contract versions declared since the table was written, and the audit
    columns a table another loader wrote lacks (the TPC-DS star's), as one schema change. Rows
    written before read the new columns as NULL: a NULL `_sequence` is older than every change."""
    if table.version is None:
        return
    written = set(run.declaration.written)  # `except_columns` are never added
    added = [(c.name, c.type) for c in run.declaration.contract.columns
             if c.name in written and c.name not in table.column_names]
    audit = [(name, kind.upper()) for name, kind in AUDIT_TYPES.items() if name not in table.column_names]
    described = {c.name: c.description for c in run.declaration.columns} | AUDIT_DESCRIPTIONS
    if table.add_columns([*added, *audit], described):
        why = [*([f"for contract v{run.declaration.contract.version}"] if added else []),
               *(["the audit columns"] if audit else [])]
        run.report.commits.append(Commit(table.version, f"add columns ({', '.join(n for n, _ in [*added, *audit])}) "
                                         f"{' and '.join(why)}", 0, 0, 0, table.rows))
