"""The snapshot guard (write-audit-publish), shared by every table a snapshot feeds (no Dagster).

A snapshot replaces what its scope holds: an insurance full load the whole table, a TPC-DS
day object its sold day. Published blindly, a truncated upload (a 0-byte re-delivery, an
export cut short) deletes the rows it lacks. So before it is published a snapshot is audited
against its scope, and held instead when

- it has no valid row (`empty`): it would delete every row of its scope;
- it has quarantined rows, where the table keeps the current rows of their keys (`rejected_rows`:
  a partial snapshot; insurance's rule, `hold_rejected`);
- it would shrink its scope by more than `max_shrink` (`shrinks`; `LAKE_FULLLOAD_MAX_SHRINK`,
  default 0.5: a truncated upload is far more likely than half the rows ending at once).

A held snapshot is parsed and audited (its bad rows quarantined) and recorded `held` with the
reason, with the sequence it was held with; it blocks nothing else. `lake approve` records it
`approved` (`approve`), and the next run publishes it, unaudited, with that sequence, through
the same path as any snapshot. Which scope a snapshot is audited against, and when, is its
table's: insurance audits every full load (a first one too: a header-only export is a broken
one); a TPC-DS day object is audited when its day holds rows (one into an empty day replaces
nothing), and content already published once (applied, reverted, approved) is not audited again.
"""

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from lake_assets.core.errors import UsageError
from lake_assets.core.ledger import APPROVED, HELD, Ledger, LedgerEntry


class HoldReason(StrEnum):
    """Why a snapshot was held for `lake approve` instead of published."""

    EMPTY = "empty"
    REJECTED_ROWS = "rejected_rows"
    SHRINKS = "shrinks"


@dataclass(frozen=True)
class Audit:
    """What publishing one snapshot would do to its scope."""

    scope: str  # what it replaces, in words: "the table", "the day 2000-01-01"
    rows: int  # its valid rows
    rejected: int  # its quarantined rows
    before: int  # rows the scope holds now
    after: int  # rows the scope would hold once it is published


@dataclass(frozen=True)
class SnapshotGuard:
    """The hold rules of one table's snapshots."""

    max_shrink: float = 0.5
    hold_rejected: bool = True  # a snapshot with quarantined rows is held (their keys would keep their rows)

    def hold(self, audit: Audit) -> str | None:
        """Why the snapshot must wait for `lake approve`, as the ledger's detail says it
        (`reason: what it would do`), or None to publish it."""
        if self.hold_rejected and audit.rejected:
            return (f"{HoldReason.REJECTED_ROWS.value}: {audit.rejected} row(s) quarantined; their keys would keep "
                    "their current rows")
        if audit.rows == 0:
            return f"{HoldReason.EMPTY.value}: the snapshot has no rows and would delete every row of {audit.scope}"
        if audit.before and audit.after < (1 - self.max_shrink) * audit.before:
            return (f"{HoldReason.SHRINKS.value}: it would shrink {audit.scope} from {audit.before} to {audit.after} "
                    f"rows (more than {self.max_shrink:.0%})")
        return None


def _approval(entry: dict, run_id: str, at: dt.datetime) -> LedgerEntry:
    """The `approved` entry that releases the object of a `held` ledger entry: the next run
    publishes it with the sequence it was held with (copied, with its counts)."""
    if entry["status"] != HELD:
        raise ValueError(f"{entry['source_file']} is {entry['status']}, not held")
    return LedgerEntry(
        table_name=entry["table_name"], source_file=entry["source_file"], source_etag=entry["source_etag"],
        source_size=entry["source_size"], source_kind=entry["source_kind"], status=APPROVED,
        rows_in_file=entry["rows_in_file"], rows_applied=0, rows_superseded=0,
        rows_quarantined=entry["rows_quarantined"], table_version=None, run_id=run_id, recorded_at=at,
        detail=f"approved; was held for {entry['detail']}", source_sequence=entry["source_sequence"])


@dataclass(frozen=True)
class Held:
    """A raw object whose snapshot waits for `lake approve`."""

    entry: dict  # its latest ledger entry (`held`, with why in `detail`)
    group: str  # the snapshot it is part of: approving one part releases them all (DMS's LOAD parts)

    @property
    def key(self) -> str:
        return self.entry["source_file"]


def approve(ledger: Ledger, held: list[Held], keys: list[str] | None, run_id: str) -> list[Held]:
    """Release the held objects named by `keys` (all of them when None; a part releases its
    whole snapshot) with one `approved` entry each; the next run publishes them."""
    if keys is None:
        chosen = held
    else:
        unknown = set(keys) - {h.key for h in held}
        if unknown:
            raise UsageError(f"not held: {', '.join(sorted(unknown))} (see `lake status`)")
        groups = {h.group for h in held if h.key in keys}
        chosen = [h for h in held if h.group in groups]
    if not chosen:
        raise UsageError("no full load is held (nor any TPC-DS day object)")
    now = dt.datetime.now(dt.timezone.utc)
    ledger.record([_approval(h.entry, run_id, now) for h in chosen])
    return chosen
