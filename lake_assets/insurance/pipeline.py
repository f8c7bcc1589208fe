"""Apply everything pending in the raw zone to the `insurance` table. Data flows one way:

raw object -> parse (parse.py) -> validate (validate.py) -> sequenced changes
-> quarantine (delta-rs) -> guard full loads -> resolve per key -> one table commit
(merge.py, on the engine) -> tombstones, SCD2 history, ledger (and beside them the change
feed). The history and the feed are written from the rows the apply resolved and
committed (the table's old rows of the keys it changed are read before its commit), not
read back.

Ordering is per key, the way `APPLY CHANGES ... SEQUENCE BY` orders it: every change
carries a sequence (core/sequence.py: the file's DMS timestamp from its name or date folders,
then its delivery, then the row), and a key takes a change only if it is at least as new
as the key's last applied change (`_sequence` on the row) and its tombstone (the last
delete, remembered for `tombstone_retention`). An older change is superseded: counted,
not lost. A CDC file with no usable sequence is refused whole (`no_sequence`).

A full load is a snapshot "as of" its stamp B: its rows are changes, and every other key
is deleted as of B (a tombstone at B), except keys whose snapshot row was quarantined,
which keep their current row. A change older than the newest applied snapshot is
superseded for keys the table no longer knows. DMS's parts `LOAD00000001.csv`, ...
`LOAD0000000A.csv`, ... pending in one folder are one snapshot (insurance/layout.py: how
each object is read is decided there, from its key and first bytes). A snapshot that is empty,
has rejected rows, or would shrink the table by more than `max_shrink` is written to the
quarantine and ledger but HELD (write-audit-publish) until `lake approve` releases it;
the next run publishes it through the same path. When several snapshots publish in one
run, the newest decides (the older ones' rows are superseded).

Writes happen in an order that makes a rerun converge after a failure at any point:
quarantine rows are inserted only if absent, the table commit is one Delta commit of
changes that are idempotent (a change equal to the key's sequence re-applies), tombstones
are upserts, the history replaces the (key, sequence) pairs it records, and the ledger
is written after them. The tombstones, history and ledger are computed against the table
as the run found it, which a rerun no longer sees once the commit is made (the rows it
removed are gone, and with them a snapshot's implied deletes). So just before its commit
a run records itself (insurance/unfinished.py: its start, the version it found, the
objects it read), and a run that finds the newest commit unrecorded in the ledger first
finishes the run that made it: the same objects resolved against the same version with
the same start give the same tombstones, history rows and ledger entries, recorded at
that commit (no second commit). Killed before its commit, a run left nothing to finish:
its objects are pending, and a snapshot delete equal to a key's tombstone re-applies.
The feed of the run's commit is written beside the history (a thread: delta-rs releases
the GIL) and its failure is raised only once the ledger is written: the next run applies
nothing again and derives that version's feed from the Delta log (the same rows), as it
does for any version the feed lacks (a run killed anywhere after its table commit).
"""

import datetime as dt
import functools
from concurrent.futures import Future, ThreadPoolExecutor
import operator
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, Field, write_deltalake
from deltalake.schema import PrimitiveType
from pyspark.sql import SparkSession

from lake_assets.core.formats.delta import file_ranges, key_ranges, open_table, row_count, to_arrow
from lake_assets.core.ledger import APPLIED, APPROVED, HELD, REJECTED, REVERTED, Ledger, LedgerEntry
from lake_assets.core import change_feed, scd2
from lake_assets.core.snapshot_guard import Audit, Held, SnapshotGuard, approve
from lake_assets.core.tables import (INSURANCE, INSURANCE_CHANGES, INSURANCE_HISTORY, INSURANCE_QUARANTINE,
                                     INSURANCE_TOMBSTONES)
from lake_assets.insurance import changes as feed, merge, unfinished
from lake_assets.insurance.changes import DerivedReport
from lake_assets.insurance.contract import (
    FULL_LOAD_OPERATION,
    KEY,
    QUARANTINE_SCHEMA,
    TABLE,
    TOMBSTONE_SCHEMA,
    DELTA_TYPES,
    Reason,
    current,
    table_columns,
    table_schema,
)
from lake_assets.insurance.layout import dms_rows, field_of, file_layout, object_refusal, snapshot_group
from lake_assets.insurance.parse import RECORD, ParsedFile, Rejected, parse_csv
from lake_assets.insurance.raw_zone import CDCLOAD, FULLLOAD, RAW_CDC, RAW_FULLLOAD, InsuranceFile, raw_objects
from lake_assets.core.dms import DmsLayout
from lake_assets.core.sequence import FileStamp, arrival_stamp, file_stamp, folder_pattern, name_part, origin, \
    row_sequences
from lake_assets.insurance.validate import validate
from lake_assets.core.quarantine import insert_absent_arrow
from lake_assets.resources.storage import LakeStorage

if TYPE_CHECKING:
    from lake_assets.resources.rules import LakeRules

STAGING = "staging/insurance/"
SEQUENCE = "_sequence"
BATCH = "_batch"


@dataclass(frozen=True)
class IngestRules:
    """The rules that shape ingestion (the `LakeRules` resource, fed from settings.py)."""

    dms: DmsLayout = DmsLayout()
    max_shrink: float = 0.5
    tombstone_retention: dt.timedelta = dt.timedelta(days=7)

    @classmethod
    def from_rules(cls, rules: "LakeRules") -> "IngestRules":
        return cls(rules.dms(), rules.fullload_max_shrink, dt.timedelta(days=rules.tombstone_retention_days))

    @property
    def guard(self) -> SnapshotGuard:
        """A full load's guard: its scope is the table, and one with quarantined rows is held
        (their keys would keep their current rows)."""
        return SnapshotGuard(self.max_shrink, hold_rejected=True)


@dataclass(eq=False)
class FileBatch:
    """One raw file after parsing, validation and sequencing."""

    obj: InsuranceFile
    parsed: ParsedFile
    valid: pa.Table  # typed rows, `_operation`, RECORD, then SEQUENCE once stamped
    rejected: Rejected
    delivery: int = 1
    stamp: FileStamp | None = None
    superseded: int = 0
    refused: bool = False  # rejected whole (bad header, no sequence), even when it has no records
    held: str | None = None  # why its snapshot waits for `lake approve`
    approved: str | None = None  # the sequence it was held with, once approved
    detail: str | None = None
    floor: str | None = None  # a full load's: the snapshot's "as of"
    key_field: int = 0  # where a record holds its key (after DMS's operation and timestamp fields)

    @property
    def status(self) -> str:
        if self.refused:
            return REJECTED
        if self.held is not None:
            return HELD
        if self.floor is not None:  # a published snapshot: with no valid row it still deleted every older key
            return APPLIED
        return REJECTED if self.valid.num_rows == 0 and len(self.rejected) else APPLIED


@dataclass(eq=False)
class Snapshot:
    """The pending parts of one full load and the stamp they share."""

    batches: list[FileBatch]
    stamp: FileStamp

    @property
    def floor(self) -> str:
        return self.stamp.base(0)

    @property
    def rows(self) -> int:
        return sum(b.valid.num_rows for b in self.batches)

    @property
    def rejected(self) -> int:
        return sum(len(b.rejected) for b in self.batches)

    @property
    def approved(self) -> bool:
        return any(b.approved is not None for b in self.batches)

    def protected_keys(self) -> np.ndarray:
        """Keys of the snapshot's quarantined rows: they keep their current row."""
        keys = set()
        for batch in self.batches:
            lines = batch.parsed.lines() if len(batch.rejected) else None
            for record in batch.rejected.records:
                field = field_of(lines.text(int(record)), batch.key_field).strip()
                if re.fullmatch(r"[+-]?[0-9]{1,10}", field) and -(2**31) <= int(field) < 2**31:
                    keys.add(int(field))
        return np.array(sorted(keys), np.int64)

    def hold(self, why: str) -> None:
        for batch in self.batches:
            batch.held = why


@dataclass
class Commit:
    version: int
    operation: str
    inserted: int
    updated: int
    deleted: int
    rows_after: int
    strategy: str = ""  # merge.Strategy: create, narrow (replaceWhere over key ranges) or rewrite


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
    derived: DerivedReport = field(default_factory=DerivedReport)  # insurance_changes + insurance_history

    def total(self, attribute: str) -> int:
        return sum(getattr(c, attribute) for c in self.commits)

    def file_total(self, attribute: str) -> int:
        return sum(getattr(f, attribute) for f in self.files)

    @property
    def held(self) -> list[LedgerEntry]:
        return [f for f in self.files if f.status == HELD]


# --- what is pending -----------------------------------------------------------------------

def pending_objects(storage: LakeStorage, ledger: Ledger, reapply: bool = False) -> list[InsuranceFile]:
    """Objects whose current (key, ETag) has no entry yet, or was approved after a hold, or
    (with `reapply`) was reverted by `lake restore`."""
    objects = raw_objects(storage)  # first: boto3 fails fast when S3 is unreachable
    latest = ledger.latest(TABLE)
    again = (APPROVED, REVERTED) if reapply else (APPROVED,)
    return [o for o in objects if (o.key, o.etag) not in latest or latest[(o.key, o.etag)]["status"] in again
            or refused_by_older_contract(latest[(o.key, o.etag)])]


def refused_by_older_contract(entry: dict) -> bool:
    """A file refused for columns no contract declared is pending again once a newer
    contract version is declared (the refusal names the version it was checked against)."""
    if entry["status"] != REJECTED or not (entry["detail"] or "").startswith(Reason.UNDECLARED_COLUMN.value):
        return False
    checked = re.search(r"contract v([0-9]+)", entry["detail"])
    return checked is not None and int(checked.group(1)) < current().version


def held_snapshots(storage: LakeStorage) -> list[Held]:
    """Full loads waiting for `lake approve` (their ledger entry's `detail` says why), each
    with its snapshot (the parts of one DMS load are approved together)."""
    latest = Ledger(storage).latest(TABLE)
    return [Held(latest[(o.key, o.etag)], snapshot_group(o.key)) for o in raw_objects(storage)
            if latest.get((o.key, o.etag), {}).get("status") == HELD]


def approve_held(storage: LakeStorage, keys: list[str] | None, run_id: str) -> list[Held]:
    """Release held full loads (all when `keys` is None; a part releases its whole snapshot).
    The next run publishes them through the same path as any full load."""
    wanted = None if keys is None else [k.removeprefix(f"s3://{storage.bucket}/") for k in keys]
    return approve(Ledger(storage), held_snapshots(storage), wanted, run_id)


# --- the run -------------------------------------------------------------------------------

def apply_pending(storage: LakeStorage, spark: SparkSession, run_id: str,
                  rules: IngestRules | None = None, reapply: bool = False) -> ApplyReport:
    """Apply what is pending; with `reapply`, also the files `lake restore` reverted. A run
    that committed to the table and was stopped before its ledger write is finished first
    (insurance/unfinished.py)."""
    rules = rules or IngestRules()
    started = time.perf_counter()
    ledger = Ledger(storage)
    pending = pending_objects(storage, ledger, reapply)
    caught_up = feed.catch_up(storage)  # versions committed since the last run's catch-up (see changes.py)
    before = open_table(storage, INSURANCE)
    report = ApplyReport(run_id, before.version() if before else None, row_count(before) if before else 0)
    stopped = unfinished.to_finish(storage, before, ledger.entries(TABLE))
    if stopped is not None:
        _finish(storage, spark, ledger, rules, report, *stopped)
        pending = pending_objects(storage, ledger, reapply)
    applied_at = dt.datetime.now(dt.timezone.utc)  # after the finished run's writes (a restore orders runs by it)
    _evolve(before, report)
    if before is not None:
        scd2.start_over(storage, INSURANCE_HISTORY, KEY, functools.partial(to_arrow, before), before.version(),
                        merge.FEW_VALUES)
    _apply(storage, spark, ledger, rules, report, run_id, applied_at, pending, before)
    report.derived.feed = caught_up.add(report.derived.feed).add(feed.catch_up(storage))  # versions still missing
    last = report.commits[-1] if report.commits else None  # the table as this run left it (no second log read)
    report.version_after = last.version if last else report.version_before
    report.rows_after = last.rows_after if last else report.rows_before
    report.duration_seconds = time.perf_counter() - started
    return report


def _finish(storage: LakeStorage, spark: SparkSession, ledger: Ledger, rules: IngestRules, report: ApplyReport,
            run: unfinished.Unfinished, committed: int) -> None:
    """Write what `run` had still to write after its table commit (`committed`): its objects
    resolved again against the version it found, with its start, recorded at its commit."""
    read = set(run.files)
    objects = [o for o in raw_objects(storage) if (o.key, o.etag) in read]  # a replaced object: its new content is pending
    found = None if run.version_before is None else open_table(storage, INSURANCE, version=run.version_before)
    _apply(storage, spark, ledger, rules, report, run.run_id, run.applied_at, objects, found, committed)


def _apply(storage: LakeStorage, spark: SparkSession, ledger: Ledger, rules: IngestRules, report: ApplyReport,
           run_id: str, applied_at: dt.datetime, pending: list[InsuranceFile], before: DeltaTable | None,
           committed: int | None = None) -> None:
    """Resolve `pending` against the table as `before` holds it, commit (unless the run's
    commit is `committed` already), then write tombstones, history and ledger."""
    history = ledger.entries(TABLE)
    approved = _approved(history)
    deliveries = _deliveries(history)
    batches = [_read_batch(storage, obj, deliveries, approved, rules) for obj in pending]
    snapshots = _snapshots([b for b in batches if b.obj.kind == FULLLOAD], _newest(history))
    changes = [b for b in batches if b.obj.kind == CDCLOAD and not b.refused]

    _release_refusals(storage, ledger, pending)
    _quarantine(storage, batches, run_id, applied_at)
    _prune_tombstones(storage, applied_at - rules.tombstone_retention)
    # a batch of changes reads its keys' rows once: their sequences now, the feed's old rows at the commit
    held = None if snapshots or before is None else _table_rows(before, _keys(changes))
    current = _current_sequences(before) if held is None else _sequences(held)
    tombstones = _tombstones(storage)
    for snapshot in snapshots:
        if not snapshot.approved:
            _guard(snapshot, current, rules.guard)
    to_publish = [s for s in snapshots if s.batches[0].held is None]
    newest = max(to_publish, key=lambda s: s.floor, default=None)
    for snapshot in to_publish:
        if snapshot is not newest:  # an older snapshot of the same run: the newest decides
            for batch in snapshot.batches:
                batch.superseded = batch.valid.num_rows
    sources = changes + (newest.batches if newest else [])
    plan = resolve(_events(batches, sources), current, tombstones, _floor(history),
                   (newest.floor, _keys(newest.batches), newest.protected_keys()) if newest else None)
    for index, batch in enumerate(batches):
        if any(batch is source for source in sources):
            batch.superseded = batch.valid.num_rows - plan.applied_per_batch.get(index, 0)

    versions: dict[str, int] = {}
    if committed is not None:
        versions.update({b.obj.key: committed for b in sources})
    staging = f"{STAGING}{run_id}/"
    with ThreadPoolExecutor(max_workers=1) as beside:  # delta-rs writes without holding the GIL
        feed_written: Future[change_feed.FeedReport] | None = None
        try:
            if plan.touches_table and committed is None:
                unfinished.begin(storage, unfinished.Unfinished(run_id, applied_at, before.version() if before else None,
                                                                [(b.obj.key, b.obj.etag) for b in batches]))
                published = _publish(storage, spark, report, before, batches, plan, current, held, applied_at, staging,
                                     "full load" if newest else "merge")
                versions.update({b.obj.key: published.version for b in sources})
                committed = published.version
                # the commit's feed, from the rows it replaced and wrote, while the history is written
                feed_written = beside.submit(change_feed.write_version, storage, INSURANCE, INSURANCE_CHANGES, KEY,
                                             published.removed, published.added, published.version)
            _record_tombstones(storage, batches, plan, newest, applied_at)
            left = committed if committed is not None else \
                report.commits[-1].version if report.commits else report.version_before  # the version it left
            recorded = scd2.record(storage, INSURANCE_HISTORY, KEY, _history_changes(batches, plan, newest, applied_at),
                                   left, merge.FEW_VALUES)
            if recorded.version is not None:  # (a run finishing a stopped one may record nothing of its own)
                report.derived.history = recorded
            files = [_ledger_entry(b, versions.get(b.obj.key), run_id, applied_at) for b in batches]
            ledger.record(files)
            report.files += files
            if committed is not None:
                unfinished.end(storage, run_id)
        except BaseException as error:
            _clean_up(storage, staging, error)
            raise
        _clean_up(storage, staging, None)
        if feed_written is not None:  # its failure surfaces once the ledger is written: the rerun only catches up
            report.derived.feed = feed_written.result()


def _release_refusals(storage: LakeStorage, ledger: Ledger, pending: list[InsuranceFile]) -> None:
    """Files refused for undeclared columns, pending again under a newer contract: their
    rows leave the quarantine (the new attempt accounts for them). Nothing is lost if the
    run fails later: the ledger still says refused, so the next run does this again."""
    latest = ledger.latest(TABLE)
    released = [o for o in pending if (o.key, o.etag) in latest and refused_by_older_contract(latest[(o.key, o.etag)])]
    quarantine = open_table(storage, INSURANCE_QUARANTINE) if released else None
    if quarantine is None:
        return
    files = " OR ".join(f"(source_file = '{_quoted(o.key)}' AND source_etag = '{_quoted(o.etag)}')" for o in released)
    quarantine.delete(f"reason = '{Reason.UNDECLARED_COLUMN.value}' AND ({files})")


def _quoted(value: str) -> str:
    return value.replace("'", "''")


def _evolve(delta: DeltaTable | None, report: ApplyReport) -> None:
    """Add the columns of contract versions declared since the table was written, as one
    schema-change commit (delta-rs `ADD COLUMN`: Sail has no ALTER TABLE ADD COLUMNS).
    Rows written before read the new columns as NULL. `delta` moves to the new version."""
    if delta is None:
        return
    present = {f.name for f in delta.schema().fields}
    missing = [c for c in table_columns() if c.name not in present]
    if not missing:
        return
    delta.alter.add_columns([Field(c.name, PrimitiveType(DELTA_TYPES[c.sql_type]), nullable=True,
                                   metadata={"comment": c.description}) for c in missing])
    report.commits.append(Commit(delta.version(), f"add columns ({', '.join(c.name for c in missing)}) "
                                 f"for contract v{current().version}", 0, 0, 0, row_count(delta)))


def _clean_up(storage: LakeStorage, staging: str, error: BaseException | None) -> None:
    """Remove the run's staged batch. While another error is on its way out, a failing
    cleanup (S3 down) must not replace it: it is noted on that error instead."""
    try:
        storage.delete_prefix(staging)
    except Exception as cleanup_error:  # see above
        if error is None:
            raise
        error.add_note(f"also, the staged batch {staging} could not be removed: {cleanup_error}")


def _latest(history: pa.Table) -> pa.Table:
    """Each (key, ETag)'s latest ledger entry: its state now (a file applied, then reverted
    by `lake restore`, is reverted; reapplied, it is applied again)."""
    if not history.num_rows:
        return history
    position = pa.array(np.arange(history.num_rows), pa.int64())
    newest = history.select(["source_file", "source_etag"]).append_column("_position", position) \
        .group_by(["source_file", "source_etag"]).aggregate([("_position", "max")])
    return history.take(newest["_position_max"])


def _approved(history: pa.Table) -> dict[tuple[str, str], str]:
    """(key, ETag) approved after a hold, or reverted by a restore, and the sequence each
    keeps when it is published (again): the one it was held or first applied with. A
    reverted full load, applied again on request, is not held again."""
    latest = _latest(history).select(["source_file", "source_etag", "status", "source_sequence"]).to_pylist()
    return {(e["source_file"], e["source_etag"]): e["source_sequence"] for e in latest
            if e["status"] in (APPROVED, REVERTED)}


def _newest(history: pa.Table) -> str | None:
    """The sequence of the newest file applied, held or reverted so far (a snapshot arriving
    now follows it). A reverted file still counts: it arrived before, and if it is applied
    again it must not overtake a snapshot that arrived after it."""
    latest = _latest(history)
    seen = latest.filter(pc.is_in(latest["status"], pa.array([APPLIED, HELD, APPROVED, REVERTED])))
    return pc.max(seen["source_sequence"]).as_py() if seen.num_rows else None


def _deliveries(history: pa.Table) -> dict[str, set[str]]:
    """Every ETag seen under each key: the next new content is delivery len(...) + 1.
    Whatever their latest status (a reverted file keeps its delivery number when reapplied)."""
    seen: dict[str, set[str]] = {}
    for key, etag in zip(history["source_file"].to_pylist(), history["source_etag"].to_pylist()):
        seen.setdefault(key, set()).add(etag)
    return seen


def _floor(history: pa.Table) -> str | None:
    """The stamp of the newest applied snapshot: older changes to keys it removed are superseded.
    A snapshot reverted by `lake restore` no longer counts."""
    latest = _latest(history)
    applied = latest.filter(pc.and_(pc.equal(latest["status"], APPLIED), pc.equal(latest["source_kind"], FULLLOAD)))
    return pc.max(applied["source_sequence"]).as_py() if applied.num_rows else None


def _read_batch(storage: LakeStorage, obj: InsuranceFile, deliveries: dict[str, set[str]],
                approved: dict[tuple[str, str], str], rules: IngestRules) -> FileBatch:
    """Read one object the way its key and first bytes say (insurance/layout.py)."""
    data, etag = storage.get_bytes(obj.key)
    obj = InsuranceFile(obj.key, etag, len(data), obj.kind)
    delivery = len(deliveries.get(obj.key, set()) - {etag}) + 1
    layout = file_layout(obj.kind, data, rules.dms)
    parsed = parse_csv(obj.key, etag, data, list(layout.columns), has_header=layout.header)
    refusal = object_refusal(obj.kind, obj.key, rules.dms) or layout.refusal
    if refusal is not None:
        return _reject_all(obj, parsed, refusal.reason, refusal.detail)
    zone = RAW_FULLLOAD if obj.kind == FULLLOAD else RAW_CDC
    stamp = file_stamp(obj.key.removeprefix(zone), folder_pattern(rules.dms.folder_date_format))
    operation = FULL_LOAD_OPERATION if obj.kind == FULLLOAD else None if layout.operation else "I"
    valid, invalid = validate(dms_rows(parsed.rows, rules.dms), operation)
    batch = FileBatch(obj, parsed, valid, parsed.rejected + invalid, delivery,
                      None if stamp is None else stamp.of(obj.key), approved=approved.get((obj.key, etag)),
                      key_field=layout.key_field)
    if not len(batch.rejected):
        parsed.release()  # no record will be quarantined: its bytes and string rows are not needed
    return batch


def _reject_all(obj: InsuranceFile, parsed: ParsedFile, reason: Reason, detail: str) -> FileBatch:
    records = np.sort(np.concatenate([parsed.rows[RECORD].to_numpy(), parsed.rejected.records]))
    rejected = Rejected(records, [reason.value] * len(records), [detail] * len(records))
    return FileBatch(obj, parsed, pa.table({RECORD: pa.array([], pa.int64())}), rejected, refused=True,
                     detail=f"{reason.value}: {detail}")


def _snapshots(batches: list[FileBatch], newest_applied: str | None) -> list[Snapshot]:
    """Group full-load files into snapshots and stamp them (see core/sequence.py): with the
    stamp they were held with, once approved; else with the earliest time their names or
    folders give; else as of their arrival (after `newest_applied`, the newest file applied
    or held before). A part's rows carry its part number."""
    groups: dict[str, list[FileBatch]] = {}
    for batch in batches:
        groups.setdefault(snapshot_group(batch.obj.key), []).append(batch)
    snapshots = []
    for group, parts in sorted(groups.items()):
        held = [b.approved for b in parts if b.approved is not None]
        readable = [b for b in parts if not b.refused]  # a refused part still makes its snapshot suspicious
        if held:
            stamp = FileStamp.parse(min(held))
        elif readable and all(b.stamp is not None for b in readable):
            stamp = FileStamp(min(b.stamp.time for b in readable))
        else:  # snapshots arriving together follow each other in key order
            stamp = arrival_stamp(newest_applied)
            newest_applied = stamp.base(0)
        for batch in readable:
            part = stamp.part
            if group != batch.obj.key and stamp.part == 0:  # DMS's parts, in the order of their hex counters
                part = name_part(batch.obj.key.rpartition("/")[2].rsplit(".", 1)[0])
            batch.stamp = FileStamp(stamp.time, part, origin(batch.obj.key))
            batch.floor = stamp.base(0)
        snapshots.append(Snapshot(parts, stamp))
    return sorted(snapshots, key=lambda s: s.floor)


def _keys(batches: list[FileBatch]) -> np.ndarray:
    keys = [b.valid[KEY].to_numpy() for b in batches if KEY in b.valid.column_names]
    return _unique(np.concatenate(keys).astype(np.int64)) if keys else np.empty(0, np.int64)


def _unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct keys; a file already in key order (a full load usually is) is not sorted again."""
    return keys if _strictly_increasing(keys) else np.unique(keys)


def _strictly_increasing(keys: np.ndarray) -> bool:
    return bool(np.all(keys[1:] > keys[:-1]))


def _guard(snapshot: Snapshot, current: pa.Table, guard: SnapshotGuard) -> None:
    """Hold a snapshot that is empty, has rejected rows, or shrinks the table too much
    (core/snapshot_guard.py): its scope is the whole table."""
    before, after = current.num_rows, snapshot.rows
    if before and snapshot.rows and not snapshot.rejected:  # the keys it leaves: its own and those newer than it
        newer = current.filter(pc.greater_equal(pc.fill_null(current[SEQUENCE], ""), snapshot.floor))[KEY].to_numpy()
        after = len(np.union1d(_keys(snapshot.batches), newer))
    held = guard.hold(Audit("the table", snapshot.rows, snapshot.rejected, before, after))
    if held is not None:
        snapshot.hold(held)


# --- resolving changes per key -------------------------------------------------------------

@dataclass
class Plan:
    """What one run changes: the winning changes (full rows) and the keys a snapshot deletes."""

    winners: pa.Table  # one row per key: data, `_operation`, SEQUENCE, BATCH, RECORD
    snapshot_deletes: np.ndarray  # keys deleted as of the snapshot's floor (all get a tombstone)
    row_deletes: np.ndarray  # those of them with a row in the table
    floor: str | None
    applied_per_batch: dict[int, int]
    changes: pa.Table  # every change the history records (those the floor superseded are not); as `winners`

    @property
    def touches_table(self) -> bool:
        return bool(self.winners.num_rows or len(self.row_deletes))


def resolve(events: pa.Table, current: pa.Table, tombstones: pa.Table, floor: str | None,
            snapshot: tuple[str, np.ndarray, np.ndarray] | None) -> Plan:
    """Per key, the newest of: the table's row, its tombstone, this run's changes, and the
    snapshot's delete at its floor (for keys outside the snapshot). Ties re-apply (a rerun).

    `current` and `tombstones` hold (KEY, SEQUENCE); `snapshot` is (floor, its keys, its
    protected keys); `floor` is the newest applied snapshot's, before this run.
    """
    existing = _existing(current, tombstones)
    events = events.cast(events.schema.set(events.schema.get_field_index(KEY), pa.field(KEY, pa.int64())))
    position = pc.index_in(events[KEY], value_set=existing[KEY])  # a lookup, not a join of wide rows
    events = events.append_column("_existing", existing["_existing"].take(position))
    if floor is not None:  # older than the last snapshot, for a key it does not know: superseded
        unknown = pc.is_null(events["_existing"])
        events = events.filter(pc.invert(pc.and_(unknown, pc.less(events[SEQUENCE], floor))))
    changes = events.drop_columns(["_existing"])  # what the history records: winners and superseded alike
    keys = events[KEY].to_numpy()
    if not _strictly_increasing(keys) and len(np.unique(keys)) != len(keys):  # the newest change per key
        events = events.sort_by([(KEY, "ascending"), (SEQUENCE, "ascending")])
        keys = events[KEY].to_numpy()
        events = events.filter(pa.array(np.append(keys[1:] != keys[:-1], True)))
    newer = pc.or_(pc.is_null(events["_existing"]), pc.greater_equal(events[SEQUENCE], events["_existing"]))
    if not pc.all(pc.fill_null(newer, True)).as_py():
        events = events.filter(pc.fill_null(newer, True))

    deletes = np.empty(0, np.int64)
    if snapshot is not None:
        base, inside, protected = snapshot
        kept = np.union1d(inside, protected) if len(protected) else inside
        # keys outside the snapshot (numpy's isin looks integer keys up in a table: no sort)
        pool = pa.concat_tables([existing.rename_columns([KEY, SEQUENCE]), events.select([KEY, SEQUENCE])])
        pool = pool.filter(pa.array(~np.isin(pool[KEY].to_numpy(), kept)))
        newest = pool.group_by(KEY).aggregate([(SEQUENCE, "max")])
        # a key whose newest is the snapshot's own tombstone (a rerun) is deleted again: ties re-apply
        deletes = np.sort(newest.filter(pc.less_equal(newest[f"{SEQUENCE}_max"], base))[KEY].to_numpy())
        if len(deletes):
            beaten = pc.and_(pc.is_in(events[KEY], value_set=pa.array(deletes, pa.int64())),
                             pc.less(events[SEQUENCE], base))
            events = events.filter(pc.invert(beaten))
    batches, counts = np.unique(events[BATCH].to_numpy(), return_counts=True)
    table_keys = current[KEY].cast(pa.int64())
    with_rows = table_keys.filter(pc.is_in(table_keys, value_set=pa.array(deletes, pa.int64()))).to_numpy()
    return Plan(events.drop_columns(["_existing"]), deletes, np.sort(with_rows),
                snapshot[0] if snapshot else None,
                {int(b): int(c) for b, c in zip(batches, counts)}, changes)


def _existing(current: pa.Table, tombstones: pa.Table) -> pa.Table:
    """(KEY, `_existing`): per key, the newest sequence of its row and its tombstone.
    The table's keys are distinct, so without tombstones no grouping is needed."""
    current = current.select([KEY, SEQUENCE]).cast(_KEYED)
    if tombstones.num_rows:
        known = pa.concat_tables([current, tombstones.select([KEY, SEQUENCE]).cast(_KEYED)])
        current = known.group_by(KEY).aggregate([(SEQUENCE, "max")])
        current = current.select([KEY, f"{SEQUENCE}_max"])
    return pa.table({KEY: current.column(0), "_existing": current.column(1)})


_KEYED = pa.schema([(KEY, pa.int64()), (SEQUENCE, pa.string())])


def _events(batches: list[FileBatch], sources: list[FileBatch]) -> pa.Table:
    """The valid rows of `sources`, sequenced, with the index of their batch."""
    tables = []
    for index, batch in enumerate(batches):
        if batch in sources and KEY in batch.valid.column_names:
            rows = batch.valid.append_column(SEQUENCE, row_sequences(batch.stamp, batch.delivery, batch.valid[RECORD]))
            tables.append(rows.append_column(BATCH, pa.repeat(pa.scalar(index, pa.int64()), rows.num_rows)))
    if not tables:
        return pa.table({KEY: pa.array([], pa.int64()), "_operation": pa.array([], pa.string()),
                         RECORD: pa.array([], pa.int64()), SEQUENCE: pa.array([], pa.string()),
                         BATCH: pa.array([], pa.int64())})
    return pa.concat_tables(tables)


def _current_sequences(delta: DeltaTable | None) -> pa.Table:
    """(KEY, SEQUENCE) of every row of the table (`delta`, as the run found it)."""
    if delta is None:
        return _KEYED.empty_table()
    return _sequences(_table_rows(delta, None, [KEY, SEQUENCE] if SEQUENCE in delta.schema().to_arrow().names
                                  else [KEY]))


def _sequences(rows: pa.Table) -> pa.Table:
    """(KEY, SEQUENCE) of table rows; a row without one (written before rows carried a
    sequence) is older than any."""
    sequences = rows[SEQUENCE] if SEQUENCE in rows.column_names else pa.nulls(rows.num_rows, pa.string())
    return pa.table({KEY: rows[KEY], SEQUENCE: pc.fill_null(sequences, "")}).cast(_KEYED)


def _table_rows(delta: DeltaTable, keys: np.ndarray | None, columns: list[str] | None = None) -> pa.Table:
    """The rows of `keys` (sorted, unique; all rows when None) in the table `delta`, reading
    only the files whose key range (the log's statistics) holds one of them: the dataset is
    built of those files alone."""
    if keys is None:
        return delta.to_pyarrow_dataset().to_table(columns=columns)
    ranges = key_ranges(keys, *file_ranges(delta, KEY)[:2])
    if not ranges:
        schema = pa.schema(delta.schema().to_arrow())
        return schema.empty_table().select(columns or schema.names)
    within = functools.reduce(operator.or_, [(pc.field(KEY) >= low) & (pc.field(KEY) <= high)
                                             for low, high in ranges])
    dataset = delta.to_pyarrow_dataset(file_pruning_predicate=merge.predicate(ranges))
    return dataset.to_table(columns=columns, filter=within & pc.field(KEY).isin(pa.array(keys, pa.int32())))


# --- writing -------------------------------------------------------------------------------

@dataclass
class Published:
    """A table commit, and what its change feed is made of: the rows it replaced (those of
    the keys it changed, as the run found them) and the rows it wrote for them."""

    version: int
    removed: pa.Table
    added: pa.Table


def _publish(storage: LakeStorage, spark: SparkSession, report: ApplyReport, delta: DeltaTable | None,
             batches: list[FileBatch], plan: Plan, current: pa.Table, held: pa.Table | None, applied_at: dt.datetime,
             staging: str, operation: str) -> Published:
    """Stage the run's changes and commit them to the table in one Delta commit: the first
    commit, a narrow replace of the files holding the batch's keys, or a rewrite (merge.py).
    `delta` is the table as the run found it (the run holds its write lock); `current` holds
    (KEY, SEQUENCE) of its rows for at least the batch's keys, `held` (unless None) those
    rows whole. Every staged row is newer than its key's row (resolve), so the commit
    replaces the rows of the staged keys the table holds by the staged upserts: taken from
    `held` or read here, before it, for its change feed."""
    rows = _with_audit(batches, plan.winners, applied_at)
    if len(plan.row_deletes):
        deleting = pa.array(plan.row_deletes, pa.int64())
        count = len(deleting)
        deletes = pa.table({name: pa.nulls(count, rows.schema.field(name).type) for name in rows.schema.names})
        deletes = deletes.set_column(0, KEY, deleting.cast(pa.int32())) \
            .set_column(deletes.schema.get_field_index("_operation"), "_operation", pa.repeat("D", count)) \
            .set_column(deletes.schema.get_field_index(SEQUENCE), SEQUENCE, pa.repeat(plan.floor, count))
        rows = pa.concat_tables([rows, deletes.cast(rows.schema)])
    counts = _row_counts(rows, current)
    staged = merge.stage_sorted(storage, f"{staging}changes/", rows)
    uri = INSURANCE.uri(storage)
    upserting = pc.not_equal(rows["_operation"], "D")
    added = rows if pc.all(upserting).as_py() else rows.filter(upserting)  # no copy for a load without deletes
    if delta is None:
        version = _commit(storage, report, operation, merge.Strategy.CREATE, counts,
                          lambda: merge.create_from(spark, uri, staged, _label(operation, merge.Strategy.CREATE)))
        return Published(version, rows.schema.empty_table(), added)
    keys = np.unique(rows[KEY].to_numpy()).astype(np.int64)
    removed = _table_rows(delta, keys[np.isin(keys, current[KEY].to_numpy())]) if held is None else \
        held.filter(np.isin(held[KEY].to_numpy(), keys))
    mins, maxs, files_rows = file_ranges(delta, KEY)
    ranges = key_ranges(keys, mins, maxs)
    strategy = merge.choose(merge.rows_within(ranges, mins, maxs, files_rows), int(files_rows.sum()))
    if strategy is merge.Strategy.REWRITE:
        version = _commit(storage, report, operation, strategy, counts,
                          lambda: merge.rewrite_changes(spark, uri, staged, _label(operation, strategy)))
    else:
        version = _commit(storage, report, operation, strategy, counts,
                          lambda: merge.replace_changes(spark, uri, staged, ranges, _label(operation, strategy)))
    return Published(version, removed, added)


def _label(operation: str, strategy: merge.Strategy) -> str:
    """The lake's name for a table commit, kept in its commitInfo: e.g. `merge (narrow)`."""
    return f"{operation} ({strategy.value})"


def _row_counts(rows: pa.Table, current: pa.Table) -> tuple[int, int, int]:
    """(inserted, updated, deleted) of committing `rows`: every staged row is newer than the
    key's row (resolve() kept only those), so an upsert of a present key updates it."""
    present = pc.is_in(rows[KEY].cast(pa.int64()), value_set=current[KEY].cast(pa.int64()))
    upsert = pc.not_equal(rows["_operation"], "D")

    def total(mask: pa.ChunkedArray) -> int:
        return int(pc.sum(mask.cast(pa.int64())).as_py() or 0)
    return total(pc.and_(upsert, pc.invert(present))), total(pc.and_(upsert, present)), \
        total(pc.and_(pc.invert(upsert), present))


def _with_audit(batches: list[FileBatch], rows: pa.Table, applied_at: dt.datetime) -> pa.Table:
    """Add `_source_file`, `_source_line` and `_applied_at`; conform to the table schema."""
    files = rows[BATCH].to_numpy()
    records = rows[RECORD].to_numpy()
    lines = np.empty(rows.num_rows, np.int64)
    for i, batch in enumerate(batches):
        mask = files == i
        if mask.any():
            lines[mask] = batch.parsed.line_numbers(records[mask])
    audited = rows.append_column("_source_file", pa.nulls(rows.num_rows, pa.string())) \
        .append_column("_source_line", pa.array(lines)) \
        .append_column("_applied_at", pa.repeat(pa.scalar(applied_at, pa.timestamp("us", tz="UTC")), rows.num_rows))
    audited = merge.conform(audited)
    # each row's file as an index into the run's file names: no string per row (staged as strings)
    keys = pa.DictionaryArray.from_arrays(pa.array(files.astype(np.int32)), pa.array([b.obj.key for b in batches]))
    return audited.set_column(audited.schema.get_field_index("_source_file"), "_source_file", keys)


def _commit(storage: LakeStorage, report: ApplyReport, operation: str, strategy: merge.Strategy,
            counts: tuple[int, int, int], write) -> int:
    """Run the table commit; record its version, how it was made and its row counts."""
    write()
    delta = open_table(storage, INSURANCE)
    commit = Commit(delta.version(), operation, *counts, row_count(delta), strategy.value)
    report.commits.append(commit)
    return commit.version


def _history_changes(batches: list[FileBatch], plan: Plan, snapshot: Snapshot | None,
                     at: dt.datetime) -> pa.Table:
    """The run's changes as the history records them (core/scd2.py): every change the plan
    kept (winners and superseded; a delete with the image its row carried), and the
    snapshot's implied deletes at its floor (key only)."""
    if not plan.changes.num_rows:
        rows = table_schema().empty_table()
    else:
        rows = _with_audit(batches, plan.changes, at)
    if snapshot is not None and len(plan.snapshot_deletes):
        count = len(plan.snapshot_deletes)
        implied = {KEY: pa.array(plan.snapshot_deletes, pa.int64()).cast(rows.schema.field(KEY).type),
                   "_operation": pa.repeat("D", count), SEQUENCE: pa.repeat(plan.floor, count),
                   "_source_file": pa.repeat(snapshot.batches[0].obj.key, count),
                   "_applied_at": pa.repeat(pa.scalar(at, rows.schema.field("_applied_at").type), count)}
        rows = rows.set_column(rows.schema.get_field_index("_source_file"), "_source_file",
                               rows["_source_file"].cast(pa.string()))
        rows = pa.concat_tables([rows, pa.table({n: implied.get(n, pa.nulls(count, rows.schema.field(n).type))
                                                 for n in rows.schema.names}, schema=rows.schema)])
    return rows


def _tombstones(storage: LakeStorage) -> pa.Table:
    delta = open_table(storage, INSURANCE_TOMBSTONES)
    return _KEYED.empty_table() if delta is None else to_arrow(delta).select([KEY, SEQUENCE]).cast(_KEYED)


def _prune_tombstones(storage: LakeStorage, cutoff: dt.datetime) -> None:
    """Forget deletes older than the retention window (one commit, only when some expired)."""
    delta = open_table(storage, INSURANCE_TOMBSTONES)
    if delta is None:
        return
    deleted_at = to_arrow(delta)["deleted_at"]
    if pc.any(pc.less(deleted_at, pa.scalar(cutoff, deleted_at.type))).as_py():
        delta.delete(f"deleted_at < '{cutoff.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}'")


def _record_tombstones(storage: LakeStorage, batches: list[FileBatch], plan: Plan, snapshot: Snapshot | None,
                       at: dt.datetime) -> None:
    """Remember this run's deletes (upsert: a newer delete replaces an older one)."""
    deleted = plan.winners.filter(pc.equal(plan.winners["_operation"], "D"))
    files = pa.array([b.obj.key for b in batches], pa.string())
    parts = [pa.table({KEY: deleted[KEY].cast(pa.int32()), SEQUENCE: deleted[SEQUENCE],
                       "source_file": files.take(deleted[BATCH]),
                       "deleted_at": pa.repeat(pa.scalar(at, pa.timestamp("us", tz="UTC")), deleted.num_rows)})]
    if snapshot is not None and len(plan.snapshot_deletes):
        count = len(plan.snapshot_deletes)
        parts.append(pa.table({KEY: pa.array(plan.snapshot_deletes, pa.int64()).cast(pa.int32()),
                               SEQUENCE: pa.repeat(plan.floor, count),
                               "source_file": pa.repeat(snapshot.batches[0].obj.key, count),
                               "deleted_at": pa.repeat(pa.scalar(at, pa.timestamp("us", tz="UTC")), count)}))
    rows = pa.concat_tables(parts).cast(TOMBSTONE_SCHEMA)
    if not rows.num_rows:
        return
    uri, options = INSURANCE_TOMBSTONES.uri(storage), storage.delta_storage_options()
    if open_table(storage, INSURANCE_TOMBSTONES) is None:
        write_deltalake(uri, rows, mode="append", storage_options=options)
        return
    (DeltaTable(uri, storage_options=options)
     .merge(rows, predicate=f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t")
     .when_matched_update_all(predicate=f"s.{SEQUENCE} > t.{SEQUENCE}")
     .when_not_matched_insert_all()
     .execute())


def _quarantine(storage: LakeStorage, batches: list[FileBatch], run_id: str, at: dt.datetime) -> None:
    """Insert every rejected record (unless already there from an earlier, failed run)."""
    parts = [_quarantine_rows(b, run_id, at) for b in batches if len(b.rejected)]
    if not parts:
        return
    insert_absent_arrow(storage, INSURANCE_QUARANTINE, pa.concat_tables(parts))


def _quarantine_rows(batch: FileBatch, run_id: str, at: dt.datetime) -> pa.Table:
    order = np.argsort(batch.rejected.records, kind="stable")
    records = batch.rejected.records[order]
    lines = batch.parsed.lines()
    count = len(records)
    return pa.table({
        "source_file": pa.repeat(batch.obj.key, count),
        "source_etag": pa.repeat(batch.obj.etag, count),
        "line_number": pa.array([lines.line_number(int(r)) for r in records], pa.int64()),
        "reason": pa.array(batch.rejected.reasons, pa.string()).take(pa.array(order)),
        "detail": pa.array(batch.rejected.details, pa.string()).take(pa.array(order)),
        "raw_text": pa.array([lines.text(int(r)) for r in records], pa.string()),
        "run_id": pa.repeat(run_id, count),
        "quarantined_at": pa.repeat(pa.scalar(at, pa.timestamp("us", tz="UTC")), count),
    }, schema=QUARANTINE_SCHEMA)


def _ledger_entry(batch: FileBatch, version: int | None, run_id: str, at: dt.datetime) -> LedgerEntry:
    waiting = batch.status == HELD
    applied = 0 if waiting else batch.valid.num_rows - batch.superseded
    sequence = None
    if batch.stamp is not None:
        sequence = batch.floor if batch.obj.kind == FULLLOAD else batch.stamp.base(batch.delivery)
    return LedgerEntry(
        table_name=TABLE, source_file=batch.obj.key, source_etag=batch.obj.etag, source_size=batch.obj.size,
        source_kind=batch.obj.kind, status=batch.status, rows_in_file=batch.parsed.record_count,
        rows_applied=applied, rows_superseded=0 if waiting else batch.superseded,
        rows_quarantined=len(batch.rejected), table_version=None if waiting else version, run_id=run_id,
        recorded_at=at, detail=batch.detail if batch.refused else batch.held or batch.detail, source_sequence=sequence,
    )
