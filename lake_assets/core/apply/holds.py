"""Write-audit-publish: full loads held for `lake approve`, and their release.

A snapshot that is empty, has refused rows, or would shrink its table by more than the
declared share is read, quarantined and recorded `held` in the ledger, but not published
(run.py's guard). `lake approve` records it `approved`; the next run publishes it through the
same path as any snapshot, stamped with the sequence it was held with.
"""

import datetime as dt

from lake_assets.core.apply.plan import LEDGER_KIND, RawFile, raw_files, snapshot_group
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.errors import UsageError
from lake_assets.core.ledger import APPROVED, HELD, Ledger, LedgerEntry
from lake_assets.resources.storage import LakeStorage


def held_objects(declaration: TableDeclaration, storage: LakeStorage) -> list[tuple[RawFile, dict]]:
    """The table's snapshots waiting for `lake approve`, with their ledger entry (`detail` says why)."""
    latest = Ledger(storage).latest(declaration.name)
    return [(f, latest[(f.key, f.etag)]) for f in raw_files(declaration, storage)
            if latest.get((f.key, f.etag), {}).get("status") == HELD]


def approve_held(declaration: TableDeclaration, storage: LakeStorage, keys: list[str] | None,
                 run_id: str) -> list[RawFile]:
    """Release held snapshots (all when `keys` is None; a part releases its whole snapshot)."""
    held = held_objects(declaration, storage)
    if keys is None:
        chosen = [f for f, _ in held]
    else:
        wanted = {k.removeprefix(f"s3://{storage.bucket}/") for k in keys}
        unknown = wanted - {f.key for f, _ in held}
        if unknown:
            raise UsageError(f"not held: {', '.join(sorted(unknown))} (see `lake status`)")
        groups = {snapshot_group(k) for k in wanted}
        chosen = [f for f, _ in held if snapshot_group(f.key) in groups]
    if not chosen:
        raise UsageError("no full load is held")
    now = dt.datetime.now(dt.timezone.utc)
    Ledger(storage).record([
        LedgerEntry(table_name=declaration.name, source_file=f.key, source_etag=f.etag, source_size=f.size,
                    source_kind=LEDGER_KIND[f.kind], status=APPROVED, rows_in_file=e["rows_in_file"],
                    rows_applied=0, rows_superseded=0, rows_quarantined=e["rows_quarantined"], table_version=None,
                    run_id=run_id, recorded_at=now, detail=f"approved; was held for {e['detail']}",
                    source_sequence=e["source_sequence"])
        for f, e in held if f in chosen])
    return chosen
