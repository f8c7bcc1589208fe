"""An Iceberg table's change feed, derived from its snapshots (what Spark's
`create_changelog_view` gives on the JVM; neither Sail nor pyiceberg has one).

The feed of snapshot S is, as for the Delta feed (core/change_feed.py), the rows S removed
against the rows S added, without the rows present, equal in every column, on both sides
(carried over). S's files are compared with its parent's (the live files of each, from their
manifests), so every kind of commit reads alike:
- removed: the parent's live rows of the data files S no longer has (a copy-on-write MERGE,
  an overwrite, a compaction), and the rows S's new position delete files point at (a
  merge-on-read MERGE, which leaves the data files in place);
- added: the rows of the data files S added, less those its own position deletes point at.
Per key: only removed -> `delete`, only added -> `insert`, both -> `update_preimage` +
`update_postimage`. A snapshot that wrote equality delete files has no feed here
(FeedUnavailable): the lake's engines never write them.

The feed is read on demand, never stored: Iceberg keeps every snapshot's files until
`expire_snapshots`, and a feed cannot outlive the files it is read from. Versions are
snapshot ids; a range is the current lineage from one snapshot to another (both included),
oldest first. The rows are compared in DuckDB (`EXCEPT ALL`: NULL equals NULL, any key).
"""

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from lake_assets.core.change_feed import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, FeedUnavailable, ChangeType
from lake_assets.core.errors import UsageError

#: Data file content values (Iceberg spec).
_DATA, _POSITION_DELETES = 0, 1


@dataclass(frozen=True)
class _Files:
    """A snapshot's live files: data files, and position delete files (by path)."""

    data: frozenset[str]
    position_deletes: frozenset[str]


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
    parts, files = [], None  # a snapshot's live files are the next one's parent's: read once
    for snapshot in lineage(table, start, end):
        before = files if files is not None else _live_files(table, snapshot.parent_snapshot_id, snapshot)
        files = _live_files(table, snapshot.snapshot_id, snapshot)
        parts.append(_derive(table, snapshot, before, files, schema, keys))
    return pa.concat_tables(parts) if parts else _empty(schema)


def _derive(table: Table, snapshot: Snapshot, before: _Files, after: _Files, schema: pa.Schema,
            keys: list[str]) -> pa.Table:
    removed, added = before.data - after.data, after.data - before.data
    # the deletes already in force matter only for the data files the snapshot dropped
    old = _positions(table, before.position_deletes, snapshot) if removed else {}
    new = _positions(table, after.position_deletes - before.position_deletes, snapshot)
    deleted = [_rows(table, path, schema, snapshot, drop=old.get(path)) for path in sorted(removed)]
    deleted += [_rows(table, path, schema, snapshot, keep=positions)
                for path, positions in sorted(new.items()) if path in before.data - removed]
    inserted = [_rows(table, path, schema, snapshot, drop=new.get(path)) for path in sorted(added)]
    return _changes(_concat(deleted, schema), _concat(inserted, schema), schema, keys, snapshot)


def _live_files(table: Table, snapshot_id: int | None, of: Snapshot) -> _Files:
    """The live files of `snapshot_id` (none for no snapshot: the table's first)."""
    snapshot = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    data: set[str] = set()
    position_deletes: set[str] = set()
    for manifest in snapshot.manifests(table.io) if snapshot is not None else []:
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            content = entry.data_file.content
            if content == _DATA:
                data.add(entry.data_file.file_path)
            elif content == _POSITION_DELETES:
                position_deletes.add(entry.data_file.file_path)
            else:
                raise FeedUnavailable(f"snapshot {of.snapshot_id}: the table has equality delete files, "
                                      "which the derived feed does not read")
    return _Files(frozenset(data), frozenset(position_deletes))


def _positions(table: Table, delete_files: frozenset[str], snapshot: Snapshot) -> dict[str, np.ndarray]:
    """The row positions the position delete files name, by data file."""
    found: dict[str, list[np.ndarray]] = {}
    for path in sorted(delete_files):
        deletes = _read(table, path, snapshot, columns=["file_path", "pos"])
        files = deletes["file_path"].to_numpy(zero_copy_only=False)
        positions = deletes["pos"].to_numpy(zero_copy_only=False).astype(np.int64)
        for file_path in np.unique(files):
            found.setdefault(str(file_path), []).append(positions[files == file_path])
    return {path: np.concatenate(parts) for path, parts in found.items()}


def _rows(table: Table, path: str, schema: pa.Schema, snapshot: Snapshot,
          keep: np.ndarray | None = None, drop: np.ndarray | None = None) -> pa.Table:
    """A data file's rows in the current schema (columns added since read as NULL): only those at
    `keep`, or all but those at `drop`."""
    data = _read(table, path, snapshot)
    if keep is not None:
        data = data.take(pa.array(np.unique(keep)))
    elif drop is not None:
        mask = np.ones(data.num_rows, dtype=bool)
        mask[drop] = False
        data = data.filter(pa.array(mask))
    return pa.table({f.name: data[f.name].cast(f.type) if f.name in data.column_names
                     else pa.nulls(data.num_rows, f.type) for f in schema})


def _read(table: Table, path: str, snapshot: Snapshot, columns: list[str] | None = None) -> pa.Table:
    try:
        with table.io.new_input(path).open() as stream:
            return pq.read_table(stream, columns=columns)
    except OSError as error:
        raise FeedUnavailable(f"snapshot {snapshot.snapshot_id}: its file {path} cannot be read "
                              f"(expired, or S3 unreachable): {error}") from error


def _concat(parts: list[pa.Table], schema: pa.Schema) -> pa.Table:
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
