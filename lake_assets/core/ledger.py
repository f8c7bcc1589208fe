"""The ingestion ledger: which raw objects were applied or rejected, into which table version.

A Delta table (written by delta-rs, beside the curated tables) with one row per
(object, ETag) a run has finished with. An object is pending while its current
(key, ETag) is not in the ledger, so a replayed or re-delivered identical file changes
nothing, and a run that failed before recording leaves its files pending for the rerun.
"""

import datetime as dt
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import write_deltalake

from lake_assets.core.formats.delta import open_table, to_arrow
from lake_assets.resources.storage import LakeStorage
from lake_assets.core.tables import LEDGER

APPLIED = "applied"
REJECTED = "rejected"

LEDGER_SCHEMA = pa.schema([
    ("table_name", pa.string()),
    ("source_file", pa.string()),
    ("source_etag", pa.string()),
    ("source_size", pa.int64()),
    ("source_kind", pa.string()),
    ("status", pa.string()),
    ("rows_in_file", pa.int64()),
    ("rows_applied", pa.int64()),
    ("rows_superseded", pa.int64()),
    ("rows_quarantined", pa.int64()),
    ("table_version", pa.int64()),
    ("run_id", pa.string()),
    ("recorded_at", pa.timestamp("us", tz="UTC")),
])


@dataclass(frozen=True)
class LedgerEntry:
    table_name: str
    source_file: str
    source_etag: str
    source_size: int
    source_kind: str  # fullload | cdcload
    status: str  # applied | rejected
    rows_in_file: int
    rows_applied: int
    rows_superseded: int
    rows_quarantined: int
    table_version: int | None
    run_id: str
    recorded_at: dt.datetime


class Ledger:
    def __init__(self, storage: LakeStorage) -> None:
        self._storage = storage

    def entries(self, table_name: str | None = None) -> pa.Table:
        delta = open_table(self._storage, LEDGER)
        if delta is None:
            return LEDGER_SCHEMA.empty_table()
        entries = to_arrow(delta)
        if table_name is not None:
            entries = entries.filter(pc.equal(entries["table_name"], table_name))
        return entries.sort_by([("recorded_at", "ascending"), ("source_file", "ascending")])

    def done(self, table_name: str) -> set[tuple[str, str]]:
        """(key, ETag) of every object this table has finished with."""
        entries = self.entries(table_name)
        return set(zip(entries["source_file"].to_pylist(), entries["source_etag"].to_pylist()))

    def record(self, entries: list[LedgerEntry]) -> None:
        if not entries:
            return
        rows = pa.Table.from_pylist([asdict(e) for e in entries], schema=LEDGER_SCHEMA)
        write_deltalake(LEDGER.uri(self._storage), rows, mode="append",
                        storage_options=self._storage.delta_storage_options())
