"""The ingestion ledger: which raw objects were applied, rejected or held, into which table version.

A Delta table (written by delta-rs, beside the curated tables), appended to as a log keyed
by (object, ETag): the latest entry of a (key, ETag) is its state. `applied` and `rejected`
are final; `held` (a snapshot waiting for `lake approve`, with the reason in `detail`) and
`approved` (released, to be published by the next run) are not. `reverted` marks an applied
file whose changes `lake restore` took out of the table (the table went back to a version
before it); it is applied again only on request (`lake run --reapply`). An object is pending
while its current (key, ETag) has no entry, so a replayed identical file changes nothing, and
a run that failed before recording leaves its files pending for the rerun.
"""

import datetime as dt
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from lake_assets.core.formats.delta import open_table
from lake_assets.core.registry import declarations
from lake_assets.core.ledger_states import APPLIED, APPROVED, FINAL, HELD, REJECTED, REVERTED  # noqa: F401 - the states, named here with the ledger
from lake_assets.resources.storage import LakeStorage
from lake_assets.core.tables import LEDGER


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
    ("detail", pa.string()),            # why a file was held, rejected whole, approved or reverted
    ("source_sequence", pa.string()),   # the sequence just before the file's first row
])


@dataclass(frozen=True)
class LedgerEntry:
    table_name: str
    source_file: str
    source_etag: str
    source_size: int
    source_kind: str  # fullload | cdcload
    status: str  # applied | rejected | held | approved | reverted
    rows_in_file: int | None  # None: refused whole without being read (its bytes are not text)
    rows_applied: int
    rows_superseded: int
    rows_quarantined: int
    table_version: int | None
    run_id: str
    recorded_at: dt.datetime
    detail: str | None = None
    source_sequence: str | None = None


def _read(delta: DeltaTable) -> pa.Table:
    """Every row of the ledger, through delta-rs's own query engine: not through pyarrow.dataset
    (`to_pyarrow_dataset`), whose import loads pandas, 0.6 s of every `lake status`."""
    from deltalake import QueryBuilder

    result = QueryBuilder().register("ledger", delta).execute("SELECT * FROM ledger")
    return pa.RecordBatchReader.from_stream(result).read_all()


def _records(entries: pa.Table) -> list[dict]:
    """`entries.to_pylist()`, its timestamps aware (UTC) datetimes, read as UTC wall times: pyarrow's
    own conversion of a zoned timestamp imports pandas (0.6 s of every `lake status`)."""
    zoned = [f.name for f in entries.schema if pa.types.is_timestamp(f.type) and f.type.tz is not None]
    for name in zoned:
        field = entries.schema.field(name)
        entries = entries.set_column(entries.schema.get_field_index(name), name,
                                     entries[name].cast(pa.timestamp(field.type.unit)))
    rows = entries.to_pylist()
    for row in rows:
        for name in zoned:
            if row[name] is not None:
                row[name] = row[name].replace(tzinfo=dt.timezone.utc)
    return rows


def _named_now(entries: pa.Table) -> pa.Table:
    """The entries, each under its table's name now: a declared Iceberg table's runs recorded theirs
    under its bare name (`orders`) until its one name became its catalog identifier (`shop.orders`).
    The ledger is a log, appended to and never rewritten, so the old entries are renamed as read."""
    renamed = {d.name: d.table_name for d in declarations() if d.table_name != d.name}
    names = entries["table_name"]
    for old, new in renamed.items():
        names = pc.if_else(pc.equal(names, old), new, names)
    return entries.set_column(0, LEDGER_SCHEMA.field(0), names) if renamed else entries


class Ledger:
    def __init__(self, storage: LakeStorage) -> None:
        self._storage = storage

    def entries(self, table_name: str | None = None) -> pa.Table:
        delta = open_table(self._storage, LEDGER)
        if delta is None:
            return pa.Table.from_batches([], schema=LEDGER_SCHEMA)  # Schema.empty_table() imports pandas (0.6 s)
        entries = _read(delta)
        for name in LEDGER_SCHEMA.names:  # a ledger written before a column was added
            if name not in entries.column_names:
                entries = entries.append_column(LEDGER_SCHEMA.field(name),
                                                pa.nulls(entries.num_rows, LEDGER_SCHEMA.field(name).type))
        entries = _named_now(entries.select(LEDGER_SCHEMA.names).cast(LEDGER_SCHEMA))
        if table_name is not None:
            entries = entries.filter(pc.equal(entries["table_name"], table_name))
        return entries.sort_by([("recorded_at", "ascending"), ("source_file", "ascending")])

    def latest(self, table_name: str) -> dict[tuple[str, str], dict]:
        """The latest entry of every (key, ETag) this table has seen."""
        return {(e["source_file"], e["source_etag"]): e for e in _records(self.entries(table_name))}

    def latest_by_table(self) -> dict[str, dict[tuple[str, str], dict]]:
        """`latest` of every table, from one read of the ledger."""
        latest: dict[str, dict[tuple[str, str], dict]] = {}
        for entry in _records(self.entries()):
            latest.setdefault(entry["table_name"], {})[(entry["source_file"], entry["source_etag"])] = entry
        return latest

    def done(self, table_name: str) -> set[tuple[str, str]]:
        """(key, ETag) of every object this table has finished with (applied or rejected)."""
        return {k for k, e in self.latest(table_name).items() if e["status"] in FINAL}

    def settled(self, table_name: str, reapply: bool = False) -> set[tuple[str, str]]:
        """(key, ETag) of every object no run should take in (see `settled`)."""
        return settled(self.latest(table_name), reapply)

    def record(self, entries: list[LedgerEntry]) -> None:
        if not entries:
            return
        rows = pa.Table.from_pylist([asdict(e) for e in entries], schema=LEDGER_SCHEMA)
        write_deltalake(LEDGER.uri(self._storage), rows, mode="append", schema_mode="merge",
                        storage_options=self._storage.delta_storage_options())


def settled(latest: dict[tuple[str, str], dict], reapply: bool = False) -> set[tuple[str, str]]:
    """Of `latest` (`Ledger.latest`), the objects no run should take in: applied, rejected or
    held (until `lake approve` releases it), and reverted unless `reapply` (`lake run
    --reapply` applies them again)."""
    keep = (*FINAL, HELD) if reapply else (*FINAL, HELD, REVERTED)
    return {k for k, e in latest.items() if e["status"] in keep}
