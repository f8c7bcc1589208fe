"""Keep the ledger true after `lake restore`, on both formats (one rule, no Dagster).

A restored version contains a raw object when one of the object's `applied` ledger entries
was committed at a version in the restored version's lineage (what the format says it
descends from: a Delta version's predecessors, following RESTORE commits to their target;
an Iceberg snapshot's parent chain); the newest such entry is the application the restored
version holds. Then, judging each (key, ETag) by its latest entry:

- applied, but not contained: `reverted` (the restore took its changes out; a plain run
  leaves it alone, `lake run --reapply` applies it again);
- reverted by an earlier restore, and contained: `applied` again (reinstated);
- applied, contained, but the latest entry is another application (the object was reverted,
  then applied again at a later version, perhaps with other rows superseded): `applied` as the
  restored version holds it (restated), so `lake status` says what the restored table holds.

The new entries copy the application the restored version holds (its table version, counts
and `source_sequence`, which it keeps when it is applied again; a reverted entry copies the
latest), name the restore in `detail` and are recorded as of the restore's start. Lists come
in sequence order (then key), the order `--reapply` applies them in.

Tombstones (a Delta table beside either format's table), and insurance's SCD2 history,
follow the restored version's runs: they go to their version as the newest run the
restored version contains left them, that is, the last version committed before the next
run or restore began (`derived_until`; runs and restores are serialized by the table's
write lock, and each records when it began: a run its start, a restore its own start).
Restoring back, the reverted runs' tombstones go and the older ones they replaced come
back; restoring forward, the reinstated runs' come back, as they were when those runs
finished. The history likewise is the one those runs wrote, not what the same objects
recorded when applied again later.
"""

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from lake_assets.core.ledger import APPLIED, HELD, REJECTED, REVERTED, Ledger, LedgerEntry

FileId = tuple[str, str]  # (key, ETag)


@dataclass(frozen=True)
class LedgerChanges:
    """What a restore changes in the ledger, each list in sequence order: entries to record."""

    reverted: list[dict]  # latest entries of the applied objects the restored version does not contain
    reinstated: list[dict]  # the applications the restored version holds, of objects reverted before
    restated: list[dict]  # the same, of applied objects whose latest entry is another application

    def __bool__(self) -> bool:
        return bool(self.reverted or self.reinstated or self.restated)


def ledger_changes(history: pa.Table, contains: Callable[[dict], bool]) -> LedgerChanges:
    """Judge each (key, ETag) by its latest entry against the application the restored version
    holds: the newest of its applied entries that `contains(entry)` places in it."""
    latest: dict[FileId, dict] = {}
    held_by_version: dict[FileId, dict] = {}
    for entry in history.to_pylist():
        key = (entry["source_file"], entry["source_etag"])
        latest[key] = entry
        if entry["status"] == APPLIED and contains(entry):
            held_by_version[key] = entry
    reverted = [e for k, e in latest.items() if e["status"] == APPLIED and k not in held_by_version]
    reinstated = [held_by_version[k] for k, e in latest.items() if e["status"] == REVERTED and k in held_by_version]
    restated = [held_by_version[k] for k, e in latest.items() if e["status"] == APPLIED and k in held_by_version
                and _application(e) != _application(held_by_version[k])]
    return LedgerChanges(_in_sequence(reverted), _in_sequence(reinstated), _in_sequence(restated))


def _application(entry: dict) -> tuple:
    """What `lake status` says of an application: its table version and row counts."""
    return tuple(entry[c] for c in ("table_version", "rows_in_file", "rows_applied", "rows_superseded",
                                    "rows_quarantined"))


def first_runs_without_commit(history: pa.Table) -> dict[FileId, dt.datetime]:
    """When each object's first applied entry without a table version was recorded: the run
    that applied it and committed nothing (all its rows superseded). Which version contains it
    follows from the version current when that run started (a restore reinstating the entry
    copies it later; the object's applications that committed are other runs)."""
    found: dict[FileId, dt.datetime] = {}
    for entry in history.to_pylist():
        if entry["status"] == APPLIED and entry["table_version"] is None:
            found.setdefault((entry["source_file"], entry["source_etag"]), entry["recorded_at"])
    return found


def record_restore(ledger: Ledger, changes: LedgerChanges, restore: str, run_id: str, started: dt.datetime) -> None:
    """Record the reverted, reinstated and restated objects as of `started`, when the restore
    began (before it changed anything: see `derived_until`); `restore` names it ("restore to
    version 3 (as version 7)")."""
    ledger.record([_entry(e, REVERTED, f"reverted by {restore}", run_id, started) for e in changes.reverted]
                  + [_entry(e, APPLIED, f"back in the table: {restore}", run_id, started) for e in changes.reinstated]
                  + [_entry(e, APPLIED, f"as applied in the restored version: {restore}", run_id, started)
                     for e in changes.restated])


#: Entries that mark a run or a restore beginning (an approval is neither: it changes no table).
_BEGINNINGS = (APPLIED, REJECTED, HELD, REVERTED)


def derived_until(history: pa.Table, ran: Callable[[dict], bool]) -> dt.datetime | None:
    """When the first run or restore after the newest run the restored version contains
    began (None: that run is the newest; no run contained: the first one's start). The last
    version before then of a table derived from the runs (the tombstones, insurance_history)
    is as that run left it.

    A run is the applied entries it recorded: an object's first applied entry at a table
    version (a restore that reinstates it copies the entry, version and all, later);
    `ran(entry)` says whether the entry's run is in the restored version's lineage."""
    runs: dict[tuple[str, str, int | None], dict] = {}
    beginnings = []
    for entry in history.to_pylist():
        if entry["status"] in _BEGINNINGS:
            beginnings.append(entry["recorded_at"])
        if entry["status"] == APPLIED:
            runs.setdefault((entry["source_file"], entry["source_etag"], entry["table_version"]), entry)
    newest = max((e["recorded_at"] for e in runs.values() if ran(e)), default=None)
    return min((at for at in beginnings if newest is None or at > newest), default=None)


def _in_sequence(entries: list[dict]) -> list[dict]:
    return sorted(entries, key=lambda e: (e["source_sequence"] is None, e["source_sequence"] or "", e["source_file"]))


def _entry(entry: dict, status: str, detail: str, run_id: str, at: dt.datetime) -> LedgerEntry:
    """The object's entry as it was applied, with a new status (its version: the one it was applied at)."""
    return LedgerEntry(
        table_name=entry["table_name"], source_file=entry["source_file"], source_etag=entry["source_etag"],
        source_size=entry["source_size"], source_kind=entry["source_kind"], status=status,
        rows_in_file=entry["rows_in_file"], rows_applied=entry["rows_applied"],
        rows_superseded=entry["rows_superseded"], rows_quarantined=entry["rows_quarantined"],
        table_version=entry["table_version"], run_id=run_id, recorded_at=at, detail=detail,
        source_sequence=entry["source_sequence"])
