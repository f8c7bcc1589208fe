"""Apply everything pending in the raw zone to the `insurance` table. Data flows one way:

raw object -> parse (parse.py) -> validate (validate.py) -> latest row per key
-> quarantine (delta-rs) -> table commit (merge.py, on the engine) -> ledger.

Pending full loads apply first (each replaces the table's contents), then all pending
CDC files in one MERGE, in object-key order. A CDC file whose key sorts at or before a CDC
file already applied arrived late: applying it would undo newer changes, so its rows are
quarantined as `late_file` instead (re-deliver it under a newer name to apply it).

Writes happen in an order that makes a rerun converge after a failure at any point:
quarantine rows are inserted only if absent, the table commit is an idempotent upsert or
snapshot, and the ledger is written last.
"""

import datetime as dt
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from lake_assets.core.formats.delta import current_version, open_table, row_count
from lake_assets.insurance import merge
from lake_assets.insurance.contract import (
    CDC_COLUMN_NAMES,
    DATA_COLUMN_NAMES,
    FULL_LOAD_OPERATION,
    KEY,
    QUARANTINE_SCHEMA,
    TABLE,
    Reason,
)
from lake_assets.insurance.parse import RECORD, ParsedFile, Rejected, parse_csv
from lake_assets.insurance.validate import validate
from lake_assets.core.quarantine import insert_absent_arrow
from lake_assets.core.ledger import APPLIED, REJECTED, Ledger, LedgerEntry
from lake_assets.resources.storage import LakeStorage
from lake_assets.core.tables import INSURANCE, INSURANCE_QUARANTINE

RAW_FULLLOAD = "raw/fullload/"
RAW_CDC = "raw/cdcload/"
STAGING = "staging/insurance/"
FULLLOAD, CDCLOAD = "fullload", "cdcload"


@dataclass(frozen=True)
class RawObject:
    key: str
    etag: str
    size: int
    kind: str  # fullload | cdcload


@dataclass
class FileBatch:
    """One raw file after parsing and validation."""

    obj: RawObject
    parsed: ParsedFile
    valid: pa.Table  # typed rows, `_operation`, RECORD
    rejected: Rejected
    superseded: int = 0
    refused: bool = False  # rejected whole (bad header, late), even when it has no records

    @property
    def status(self) -> str:
        return REJECTED if self.refused or (self.valid.num_rows == 0 and len(self.rejected)) else APPLIED


@dataclass
class Commit:
    version: int
    operation: str
    inserted: int
    updated: int
    deleted: int
    rows_after: int


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

    def total(self, attribute: str) -> int:
        return sum(getattr(c, attribute) for c in self.commits)

    def file_total(self, attribute: str) -> int:
        return sum(getattr(f, attribute) for f in self.files)


def raw_objects(storage: LakeStorage) -> list[RawObject]:
    """Every raw object: full loads, then CDC files, each in key order."""
    return [
        RawObject(o["Key"], o["ETag"].strip('"'), int(o["Size"]), kind)
        for prefix, kind in ((RAW_FULLLOAD, FULLLOAD), (RAW_CDC, CDCLOAD))
        for o in storage.list_objects(prefix)
    ]


def pending_objects(storage: LakeStorage, ledger: Ledger) -> list[RawObject]:
    objects = raw_objects(storage)  # first: boto3 fails fast when S3 is unreachable
    done = ledger.done(TABLE)
    return [o for o in objects if (o.key, o.etag) not in done]


def apply_pending(storage: LakeStorage, spark: SparkSession, run_id: str) -> ApplyReport:
    started = time.perf_counter()
    applied_at = dt.datetime.now(dt.timezone.utc)
    ledger = Ledger(storage)
    pending = pending_objects(storage, ledger)
    before = open_table(storage, INSURANCE)
    report = ApplyReport(run_id, before.version() if before else None, row_count(before) if before else 0)
    latest_cdc = _latest_applied_cdc(ledger)

    batches = [_read_batch(storage, obj, latest_cdc) for obj in pending]
    full_loads = [b for b in batches if b.obj.kind == FULLLOAD]
    changes = [b for b in batches if b.obj.kind == CDCLOAD]
    full_winners = [_latest_per_key([batch])[0] for batch in full_loads]
    cdc_winners = _latest_per_key(changes)[0] if changes else None

    _quarantine(storage, batches, run_id, applied_at)
    versions: dict[str, int | None] = {}
    staging = f"{STAGING}{run_id}/"
    try:
        for batch, winners in zip(full_loads, full_winners):
            if batch.status == APPLIED:
                staged = merge.stage(storage, f"{staging}{len(versions)}.parquet",
                                     _with_audit([batch], winners, applied_at))
                versions[batch.obj.key] = _commit(storage, spark, report, "full load",
                                                  lambda s=staged: merge.replace_contents(spark, INSURANCE.uri(storage), s))
        if cdc_winners is not None and cdc_winners.num_rows:
            if open_table(storage, INSURANCE) is None:
                merge.create_empty(spark, INSURANCE.uri(storage))
            staged = merge.stage(storage, f"{staging}cdc.parquet", _with_audit(changes, cdc_winners, applied_at))
            rewrite = merge.prefers_rewrite(cdc_winners.num_rows, _rows_now(report))
            apply = merge.rewrite_changes if rewrite else merge.merge_changes
            version = _commit(storage, spark, report, "merge",
                              lambda: apply(spark, INSURANCE.uri(storage), staged))
            versions.update({b.obj.key: version for b in changes if b.status == APPLIED})
    finally:
        storage.delete_prefix(staging)

    report.files = [_ledger_entry(b, versions.get(b.obj.key), run_id, applied_at) for b in batches]
    ledger.record(report.files)
    after = open_table(storage, INSURANCE)
    report.version_after = after.version() if after else None
    report.rows_after = row_count(after) if after else 0
    report.duration_seconds = time.perf_counter() - started
    return report


def _latest_applied_cdc(ledger: Ledger) -> str | None:
    entries = ledger.entries(TABLE)
    applied = entries.filter(pc.and_(pc.equal(entries["status"], APPLIED),
                                     pc.starts_with(entries["source_file"], RAW_CDC)))
    return pc.max(applied["source_file"]).as_py() if applied.num_rows else None


def _read_batch(storage: LakeStorage, obj: RawObject, latest_cdc: str | None) -> FileBatch:
    data, etag = storage.get_bytes(obj.key)
    obj = RawObject(obj.key, etag, len(data), obj.kind)
    if obj.kind == FULLLOAD:
        parsed = parse_csv(obj.key, etag, data, DATA_COLUMN_NAMES, has_header=True)
        if parsed.header is not None and [h.strip().lower() for h in parsed.header] != DATA_COLUMN_NAMES:
            return _reject_all(obj, parsed, Reason.BAD_HEADER,
                               f"header must be {','.join(DATA_COLUMN_NAMES)}; found {','.join(parsed.header)}")
        valid, invalid = validate(parsed.rows, FULL_LOAD_OPERATION)
    else:
        parsed = parse_csv(obj.key, etag, data, CDC_COLUMN_NAMES, has_header=False)
        if latest_cdc is not None and obj.key <= latest_cdc:
            return _reject_all(obj, parsed, Reason.LATE_FILE,
                               f"arrived after {latest_cdc} was applied; re-deliver it under a newer name")
        valid, invalid = validate(parsed.rows, None)
    return FileBatch(obj, parsed, valid, parsed.rejected + invalid)


def _reject_all(obj: RawObject, parsed: ParsedFile, reason: Reason, detail: str) -> FileBatch:
    records = np.sort(np.concatenate([parsed.rows[RECORD].to_numpy(), parsed.rejected.records]))
    rejected = Rejected(records, [reason.value] * len(records), [detail] * len(records))
    return FileBatch(obj, parsed, pa.table({RECORD: pa.array([], pa.int64())}), rejected, refused=True)


def _latest_per_key(batches: list[FileBatch]) -> tuple[pa.Table, list[int]]:
    """Keep the last row per key across `batches` (in order) and count what was superseded."""
    tables = [b.valid.append_column("_file", pa.repeat(pa.scalar(i, pa.int64()), b.valid.num_rows))
              for i, b in enumerate(batches) if KEY in b.valid.column_names]
    if not tables:
        return pa.table({KEY: pa.array([], pa.int32())}), [0] * len(batches)
    combined = pa.concat_tables(tables)
    sequence = pc.add(pc.multiply(combined["_file"], 1 << 32), combined[RECORD])
    combined = combined.append_column("_seq", sequence)
    if pc.count_distinct(combined[KEY]).as_py() == combined.num_rows:
        winners = combined
    else:
        latest = combined.group_by(KEY).aggregate([("_seq", "max")])["_seq_max"]
        winners = combined.filter(pc.is_in(combined["_seq"], value_set=latest))
    kept = dict(zip(*np.unique(winners["_file"].to_numpy(), return_counts=True)))
    for i, batch in enumerate(batches):
        batch.superseded = batch.valid.num_rows - int(kept.get(i, 0)) if KEY in batch.valid.column_names else 0
    return winners.drop_columns(["_seq"]), [b.superseded for b in batches]


def _with_audit(batches: list[FileBatch], rows: pa.Table, applied_at: dt.datetime) -> pa.Table:
    """Add `_source_file`, `_source_line` and `_applied_at`; conform to the table schema."""
    files = rows["_file"].to_numpy() if "_file" in rows.column_names else np.zeros(rows.num_rows, np.int64)
    records = rows[RECORD].to_numpy()
    lines = np.empty(rows.num_rows, np.int64)
    for i, batch in enumerate(batches):
        mask = files == i
        lines[mask] = batch.parsed.line_numbers(records[mask])
    keys = pa.array([b.obj.key for b in batches]).take(pa.array(files))
    audited = rows.append_column("_source_file", keys).append_column("_source_line", pa.array(lines)) \
        .append_column("_applied_at", pa.repeat(pa.scalar(applied_at, pa.timestamp("us", tz="UTC")), rows.num_rows))
    return merge.conform(audited)


def _commit(storage: LakeStorage, spark: SparkSession, report: ApplyReport, operation: str, write) -> int:
    """Run one table commit; record its version and the engine's own row metrics."""
    previous = open_table(storage, INSURANCE)
    rows_before = row_count(previous) if previous else 0
    metrics = write()  # a write that is not a MERGE returns a MERGE's metrics itself
    delta = open_table(storage, INSURANCE)
    if metrics is None:
        metrics = delta.history(limit=1)[0].get("operationMetrics", {}) or {}
    rows_after = row_count(delta)
    if operation == "merge":
        commit = Commit(delta.version(), operation, int(metrics.get("numTargetRowsInserted", 0)),
                        int(metrics.get("numTargetRowsUpdated", 0)), int(metrics.get("numTargetRowsDeleted", 0)),
                        rows_after)
    else:  # a snapshot replaces every row
        commit = Commit(delta.version(), operation, rows_after, 0, rows_before, rows_after)
    report.commits.append(commit)
    return commit.version


def _rows_now(report: ApplyReport) -> int:
    """Rows in the table now: after this run's last commit, else as the run found it."""
    return report.commits[-1].rows_after if report.commits else report.rows_before


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
    applied = batch.valid.num_rows - batch.superseded
    return LedgerEntry(
        table_name=TABLE, source_file=batch.obj.key, source_etag=batch.obj.etag, source_size=batch.obj.size,
        source_kind=batch.obj.kind, status=batch.status, rows_in_file=batch.parsed.record_count,
        rows_applied=applied, rows_superseded=batch.superseded, rows_quarantined=len(batch.rejected),
        table_version=version, run_id=run_id, recorded_at=at,
    )
