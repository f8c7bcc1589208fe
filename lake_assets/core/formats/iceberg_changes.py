"""An Iceberg table's change feed, derived from its snapshots (what Spark's
`create_changelog_view` gives on the JVM; neither Sail nor pyiceberg has one).

The engine's MERGE is copy-on-write: a snapshot replaces whole data files. So the feed of
snapshot S is, as for the Delta feed (core/change_feed.py), the rows of the data files S
deleted against the rows of the files S added (from S's own manifest entries), without the
rows present, equal in every column, on both sides (carried over). Per key: only deleted ->
`delete`, only added -> `insert`, both -> `update_preimage` + `update_postimage`. A
snapshot that wrote delete files (merge-on-read) has no feed here: FeedUnavailable.

The feed is read on demand, never stored: Iceberg keeps every snapshot's files until
`expire_snapshots`, and a feed cannot outlive the files it is read from. Versions are
snapshot ids; a range is the current lineage from one snapshot to another (both included),
oldest first. The rows are compared in DuckDB (`EXCEPT ALL`: NULL equals NULL, any key).
"""

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from lake_assets.core.change_feed import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, FeedUnavailable, ChangeType
from lake_assets.core.errors import UsageError

#: Manifest entry status and content values (Iceberg spec).
_ADDED, _DELETED = 1, 2
_DATA = 0


def lineage(table: Table, start: int, end: int | None) -> list[Snapshot]:
    """The snapshots from `start` to `end` (default: the current one) on the current lineage, oldest first."""
    current = table.current_snapshot()
    last = table.snapshot_by_id(end) if end is not None else current
    if last is None:
        raise UsageError(f"no snapshot {end}; `lake history` lists them")
    chain = []
    snapshot: Snapshot | None = last
    while snapshot is not None:
        chain.append(snapshot)
        if snapshot.snapshot_id == start:
            return list(reversed(chain))
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    raise UsageError(f"snapshot {start} is not an ancestor of snapshot {last.snapshot_id}: "
                     "give snapshot ids of one lineage (`lake history` lists them, newest first)")


def read(table: Table, keys: list[str], start: int, end: int | None = None) -> pa.Table:
    """The change rows of the snapshots `start`..`end`: `_commit_version` (the snapshot id),
    `_commit_timestamp`, `_change_type`, then the table's columns; in snapshot order, by key."""
    schema = table.schema().as_arrow()
    parts = [_derive(table, snapshot, schema, keys) for snapshot in lineage(table, start, end)]
    return pa.concat_tables(parts) if parts else _empty(schema)


def _derive(table: Table, snapshot: Snapshot, schema: pa.Schema, keys: list[str]) -> pa.Table:
    entries = table.inspect.entries(snapshot_id=snapshot.snapshot_id)
    own = pc.and_(pc.equal(entries["snapshot_id"], snapshot.snapshot_id), pc.not_equal(entries["status"], 0))
    rows = entries.filter(own).select(["status", "data_file"]).to_pylist()
    if any(r["data_file"]["content"] != _DATA for r in rows):
        raise FeedUnavailable(f"snapshot {snapshot.snapshot_id} wrote delete files (merge-on-read), "
                              "which the derived feed does not read")
    files = {status: [r["data_file"]["file_path"] for r in rows if r["status"] == status]
             for status in (_ADDED, _DELETED)}
    added, deleted = (_rows(table, files[status], schema, snapshot) for status in (_ADDED, _DELETED))
    return _changes(deleted, added, schema, keys, snapshot)


def _rows(table: Table, paths: list[str], schema: pa.Schema, snapshot: Snapshot) -> pa.Table:
    """The rows of data files, in the current schema (columns added since read as NULL)."""
    parts = []
    for path in paths:
        try:
            with table.io.new_input(path).open() as stream:
                data = pq.read_table(stream)
        except OSError as error:
            raise FeedUnavailable(f"snapshot {snapshot.snapshot_id}: its data file {path} cannot be read "
                                  f"(expired, or S3 unreachable): {error}") from error
        parts.append(pa.table({f.name: data[f.name].cast(f.type) if f.name in data.column_names
                               else pa.nulls(data.num_rows, f.type) for f in schema}))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _changes(deleted: pa.Table, added: pa.Table, schema: pa.Schema, keys: list[str], snapshot: Snapshot) -> pa.Table:
    from lake_assets.resources.duckdb_reader import connect

    con = connect()
    try:
        con.register("deleted_rows", deleted)
        con.register("added_rows", added)
        def same_key(other: str) -> str:
            return " AND ".join(f"{other}.{k} IS NOT DISTINCT FROM x.{k}" for k in keys)
        columns = ", ".join(f"x.{c}" for c in schema.names)
        at = dt.datetime.fromtimestamp(snapshot.timestamp_ms / 1000, dt.timezone.utc)
        result = con.execute(f"""
            WITH b AS (SELECT * FROM deleted_rows EXCEPT ALL SELECT * FROM added_rows),
                 a AS (SELECT * FROM added_rows EXCEPT ALL SELECT * FROM deleted_rows),
                 changes AS (
                     SELECT x.*, CASE WHEN EXISTS (SELECT 1 FROM a WHERE {same_key('a')})
                                 THEN '{ChangeType.UPDATE_PREIMAGE}' ELSE '{ChangeType.DELETE}' END AS change, 0 AS o
                     FROM b AS x
                     UNION ALL
                     SELECT x.*, CASE WHEN EXISTS (SELECT 1 FROM b WHERE {same_key('b')})
                                 THEN '{ChangeType.UPDATE_POSTIMAGE}' ELSE '{ChangeType.INSERT}' END, 1
                     FROM a AS x)
            SELECT {snapshot.snapshot_id}::BIGINT AS {COMMIT_VERSION}, ?::TIMESTAMPTZ AS {COMMIT_TIMESTAMP},
                   change AS {CHANGE_TYPE}, {columns}
            FROM changes AS x ORDER BY {', '.join(f'x.{k}' for k in keys)}, o
        """, [at]).fetch_arrow_table()
    finally:
        con.close()
    return result.cast(_feed_schema(schema))


def _feed_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(COMMIT_VERSION, pa.int64()), pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC")),
                      pa.field(CHANGE_TYPE, pa.string()), *schema])


def _empty(schema: pa.Schema) -> pa.Table:
    return _feed_schema(schema).empty_table()
