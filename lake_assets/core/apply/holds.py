"""Write-audit-publish: a declared table's snapshots held for `lake approve`.

A snapshot that is empty, has refused rows, or would shrink its table by more than the declared
share is read, quarantined and recorded `held` in the ledger, but not published (run.py's guard,
core/snapshot_guard.py). `lake approve` records it `approved` (core/snapshot_guard.py `approve`);
the next run publishes it through the same path as any snapshot, stamped with the sequence it
was held with.
"""

from lake_assets.core.apply.layout import snapshot_group
from lake_assets.core.apply.plan import raw_files
from lake_assets.core.declaration import TableDeclaration
from lake_assets.core.ledger import HELD, Ledger
from lake_assets.core.snapshot_guard import Held
from lake_assets.resources.storage import LakeStorage


def held_snapshots(declaration: TableDeclaration, storage: LakeStorage) -> list[Held]:
    """The table's objects waiting for `lake approve` (their ledger entry's `detail` says why),
    each with its snapshot (the parts of one DMS load are approved together)."""
    latest = Ledger(storage).latest(declaration.table_name)
    return [Held(latest[(f.key, f.etag)], snapshot_group(f.key)) for f in raw_files(declaration, storage)
            if latest.get((f.key, f.etag), {}).get("status") == HELD]
