"""A Delta change data feed derived from the table's log, for tables the engine writes.

Sail cannot write Delta's native change data feed, so the feed of version V is derived
from what V did: the rows of the data files V removed against the rows of the files V
added (both read from the commit's JSON, `dataChange` actions only; an OPTIMIZE moves rows
without changing them and yields nothing). A row present unchanged on both sides is a
copy-on-write carry-over, not a change. Per key (unique in the table): only removed ->
`delete`, only added -> `insert`, both -> `update_preimage` + `update_postimage`.

So the feed is a pure function of the log: every data-changing commit gets its feed,
whichever strategy made it (MERGE, rewrite, full load, a delta-rs restore). A writer that
knows what it committed (the rows it replaced and the rows it wrote) can hand the feed
those instead (`write_version`): the same change rows, without reading the commit's files
back, so the cost follows the batch; the log stays the source of truth a catch-up derives
from. The cost of a derived version is the files it touched. The feed table holds the table's columns plus
`_change_type`, `_commit_version` and `_commit_timestamp` (Delta CDF semantics); writing a
range of versions replaces exactly that range, so a catch-up after a failure converges.

The table's first commit (version 0: every row an insert, nothing removed) is not copied
into the feed table: its feed is the files that commit added, read as inserts when asked,
as Delta's own change data feed answers a commit that only added files. The feed table is
created then, empty, and from then on answers version 0 from those files unless it holds
rows of version 0 (a feed written before, or `keep_first_version`). `read`,
`change_counts` and `covered_through` answer version 0 all the same, so `lake changes`
and `table_changes` are unchanged; only a query of the feed table itself lacks version
0's inserts. Before maintenance vacuums files version 0 added (`keep_first_version`),
its rows are stored, so the feed stays answerable from version 0.
"""

import datetime as dt
import json
from typing import TYPE_CHECKING
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from lake_assets.core.errors import LakeError
from lake_assets.core.formats.delta import open_table
from lake_assets.core.tables import LakeTable
from lake_assets.resources.storage import LakeStorage

if TYPE_CHECKING:  # imported where used: pyarrow.dataset imports pandas (0.23 s of every process)
    import pyarrow.dataset as ds


class ChangeType(StrEnum):
    INSERT = "insert"
    UPDATE_PREIMAGE = "update_preimage"
    UPDATE_POSTIMAGE = "update_postimage"
    DELETE = "delete"


CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP = "_change_type", "_commit_version", "_commit_timestamp"
FEED_COLUMNS = pa.schema([(CHANGE_TYPE, pa.string()), (COMMIT_VERSION, pa.int64()),
                          (COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC"))])
_TIME = FEED_COLUMNS.field(COMMIT_TIMESTAMP).type
#: Order of the rows of one key in one version: a preimage before its postimage.
_TYPE_ORDER = (ChangeType.DELETE, ChangeType.UPDATE_PREIMAGE, ChangeType.UPDATE_POSTIMAGE, ChangeType.INSERT)


#: The table version whose feed is read from the files it added, unless the feed stores it.
FROM_FILES = 0


class FeedUnavailable(LakeError):
    """A version's feed cannot be derived (its log entry or its removed files are gone)."""


@dataclass(frozen=True)
class Commit:
    """What one commit did to the table's data."""

    version: int
    timestamp: dt.datetime
    added: list[str]
    removed: list[str]
    records_added: int | None = None  # rows in the added files (their statistics), None if a file has none
    #: The partition values of each added or removed file of a partitioned table (none: not partitioned).
    partitions: dict[str, dict[str, str | None]] = field(default_factory=dict)


@dataclass
class FeedReport:
    """What a catch-up wrote: the versions it derived and the rows per change type."""

    versions: list[int] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=lambda: {t.value: 0 for t in ChangeType})
    covered_through: int | None = None  # the newest table version the feed has been derived for

    def add(self, other: "FeedReport") -> "FeedReport":
        rows = {t: self.rows.get(t, 0) + other.rows.get(t, 0) for t in {*self.rows, *other.rows}}
        return FeedReport(sorted({*self.versions, *other.versions}), rows,
                          other.covered_through if other.covered_through is not None else self.covered_through)


def read_commit(storage: LakeStorage, table: LakeTable, version: int) -> Commit:
    """The data files commit `version` added and removed, and its timestamp, from its JSON."""
    key = f"{table.prefix}/_delta_log/{version:020d}.json"
    try:
        data, _ = storage.get_bytes(key)
    except LakeError as error:
        raise FeedUnavailable(f"{table.name} v{version}: its log entry {key} cannot be read ({error}); "
                              "the feed can only be derived for versions still in the log") from error
    added: list[str] = []
    removed: list[str] = []
    records: int | None = 0
    partitions: dict[str, dict[str, str | None]] = {}
    timestamp: dt.datetime | None = None
    for line in data.decode().splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        for kind, paths in (("add", added), ("remove", removed)):
            if kind in action and action[kind].get("dataChange", True):
                if action[kind].get("deletionVector"):
                    raise FeedUnavailable(f"{table.name} v{version} uses deletion vectors, which the derived "
                                          "feed does not read")
                paths.append(_relative(action[kind]["path"], table.uri(storage)))
                if action[kind].get("partitionValues"):
                    partitions[paths[-1]] = action[kind]["partitionValues"]
                if kind == "add":
                    records = _plus_records(records, action[kind].get("stats"))
        if "commitInfo" in action and action["commitInfo"].get("timestamp") is not None:
            timestamp = dt.datetime.fromtimestamp(action["commitInfo"]["timestamp"] / 1000, dt.timezone.utc)
    if timestamp is None:  # Delta's rule without a commitInfo timestamp: the log file's modification time
        head = storage.get_client().head_object(Bucket=storage.bucket, Key=key)
        timestamp = head["LastModified"].astimezone(dt.timezone.utc)
    return Commit(version, timestamp, added, removed, records, partitions)


def _plus_records(total: int | None, stats: str | None) -> int | None:
    """`total` plus an added file's `numRecords` (its JSON statistics); None once one lacks it."""
    count = json.loads(stats).get("numRecords") if stats else None
    return None if total is None or count is None else total + int(count)


def _relative(path: str, table_uri: str) -> str:
    """A log path relative to the table root (log paths are URL-encoded, relative or absolute)."""
    if "://" in path:
        path = urlparse(path).path.removeprefix(urlparse(table_uri).path.rstrip("/") + "/").lstrip("/")
    return unquote(path)


def derive(storage: LakeStorage, table: LakeTable, key: str, version: int,
           dataset: "ds.Dataset | None" = None) -> pa.Table:
    """The change rows of `version` (table columns + change columns), ordered by key.

    `dataset` is the table's newest snapshot (its schema and file system): columns added
    after `version` read as NULL.
    """
    dataset = dataset or open_table(storage, table).to_pyarrow_dataset()
    commit = read_commit(storage, table, version)
    if not commit.added and not commit.removed:
        return _feed_schema(dataset.schema).empty_table()
    removed, added = (_rows(dataset, paths, commit, table) for paths in (commit.removed, commit.added))
    return _ordered(_change_rows(removed, added, key, commit, dataset.schema), [key])


def _feed_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema(list(schema) + list(FEED_COLUMNS))


def _change_rows(removed: pa.Table, added: pa.Table, key: str, commit: Commit, schema: pa.Schema) -> pa.Table:
    """The change rows of `commit`, which replaced the rows `removed` by the rows `added`
    (both in the table's `schema`, `added` perhaps with dictionary columns of its types;
    a row on both sides, equal, was carried over), unordered."""
    if not removed.num_rows:  # only inserts (a table's first commit): no lookup, no copy
        return _label(added, ChangeType.INSERT, commit)
    before, after = _changed(removed, added.cast(schema), schema.names, key)
    updated = pc.is_in(before[key], value_set=after[key])
    updated_after = pc.is_in(after[key], value_set=before[key])
    parts = [
        _label(before.filter(pc.invert(updated)), ChangeType.DELETE, commit),
        _label(before.filter(updated), ChangeType.UPDATE_PREIMAGE, commit),
        _label(after.filter(updated_after), ChangeType.UPDATE_POSTIMAGE, commit),
        _label(after.filter(pc.invert(updated_after)), ChangeType.INSERT, commit),
    ]
    return pa.concat_tables(parts)


def _rows(dataset: "ds.Dataset", paths: list[str], commit: Commit, table: LakeTable) -> pa.Table:
    """The rows of `commit`'s data files `paths`, partition columns from its log entry."""
    import pyarrow.dataset as ds

    if not paths:
        return dataset.schema.empty_table()
    files = ds.FileSystemDataset.from_paths(paths, schema=dataset.schema, format=ds.ParquetFileFormat(),
                                           filesystem=dataset.filesystem,
                                           partitions=[_partition(dataset.schema, commit.partitions.get(path, {}))
                                                       for path in paths])
    try:
        return files.to_table()
    except OSError as error:
        raise FeedUnavailable(f"{table.name} v{commit.version}: a file it added or replaced cannot be read "
                              f"(vacuumed, or S3 unreachable): {error}") from error


def _partition(schema: pa.Schema, values: dict[str, str | None]) -> pc.Expression:
    """A file's partition as a dataset expression (its columns read as these values), from the
    log's strings."""
    condition = pc.scalar(True)
    for name, value in values.items():
        kind = schema.field(name).type
        condition &= pc.field(name).is_null() if value is None else pc.field(name) == pa.scalar(value).cast(kind)
    return condition


def _changed(removed: pa.Table, added: pa.Table, columns: list[str], key: str) -> tuple[pa.Table, pa.Table]:
    """(removed rows, added rows) without the rows present, equal in every column, on both sides.

    Keys are unique on each side (the table's invariant), so each added row is matched with
    the removed row of its key by a hash lookup, and compared column by column (NULL equals NULL).
    """
    if not removed.num_rows or not added.num_rows:
        return removed, added
    position = pc.index_in(added[key], value_set=removed[key])  # the removed row of the same key, or null
    matched = pc.is_valid(position)
    before = removed.take(pc.fill_null(position, 0))
    same = matched
    for column in columns:
        if column == key:
            continue
        left, right = added[column], before[column]
        equal = pc.fill_null(pc.equal(left, right), False)
        same = pc.and_(same, pc.or_(equal, pc.and_(pc.is_null(left), pc.is_null(right))))
    carried = pc.filter(position, same)  # removed rows carried over unchanged
    unchanged = pc.is_in(pa.array(np.arange(removed.num_rows)), value_set=carried.cast(pa.int64()))
    return removed.filter(pc.invert(unchanged)), added.filter(pc.invert(same))


def _label(rows: pa.Table, change: ChangeType, commit: Commit) -> pa.Table:
    count = rows.num_rows
    return rows.append_column(CHANGE_TYPE, pa.repeat(pa.scalar(change.value), count)) \
        .append_column(COMMIT_VERSION, pa.repeat(pa.scalar(commit.version, pa.int64()), count)) \
        .append_column(COMMIT_TIMESTAMP, pa.repeat(pa.scalar(commit.timestamp, _TIME), count))


def covered_through(storage: LakeStorage, feed: LakeTable) -> int | None:
    """The newest version the feed answers: stored, or read from its files (FROM_FILES)."""
    delta = open_table(storage, feed)
    if delta is None:
        return None
    stored = column_max(delta, COMMIT_VERSION)
    return FROM_FILES if stored is None else max(stored, FROM_FILES)


def _answer_from_files(storage: LakeStorage, feed: LakeTable, schema: pa.Schema) -> None:
    """The feed answers the table's first commit from its files: created, empty, if absent."""
    if open_table(storage, feed) is None:
        write_deltalake(feed.uri(storage), _feed_schema(schema).empty_table(), mode="append",
                        storage_options=storage.delta_storage_options())


def _first_from_files(stored: DeltaTable | None, rows: pa.Table | None) -> int | None:
    """FROM_FILES if `read`/`change_counts` answer it from its files: the feed exists and
    does not store its rows (`rows` holds the stored rows' COMMIT_VERSION, or more)."""
    if stored is None or (rows is not None and pc.any(pc.equal(rows[COMMIT_VERSION], FROM_FILES)).as_py()):
        return None
    return FROM_FILES


def keep_first_version(storage: LakeStorage, table: LakeTable, feed: LakeTable, key: str) -> bool:
    """Store the rows of the version the feed answers from its files when some of those
    files are no longer in the table's current version (a vacuum would delete them): the
    feed stays answerable from version 0. Run under the table's write lock. True if it did."""
    stored, current = open_table(storage, feed), open_table(storage, table)
    if stored is None or current is None:
        return False
    first = FROM_FILES
    if column_min(stored, COMMIT_VERSION) == first:
        return False
    live = {_relative(uri, table.uri(storage)) for uri in current.file_uris()}
    if set(read_commit(storage, table, first).added) <= live:
        return False
    _write(storage, feed, derive(storage, table, key, first, current.to_pyarrow_dataset()), first, first)
    return True


def column_min(delta: DeltaTable, column: str) -> int | None:
    """The smallest value of an integer column (see column_max)."""
    actions = pa.table(delta.get_add_actions(flatten=True))
    if not actions.num_rows:
        return None
    stat = f"min.{column}"
    if stat in actions.column_names and pc.all(pc.is_valid(actions[stat])).as_py():
        return pc.min(actions[stat]).as_py()
    return pc.min(delta.to_pyarrow_dataset().to_table(columns=[column])[column]).as_py()


def column_max(delta: DeltaTable, column: str) -> int | None:
    """The largest value of an integer column: from the log's file statistics (no data read),
    or by reading the column where a file has none."""
    actions = pa.table(delta.get_add_actions(flatten=True))
    if not actions.num_rows:
        return None
    stat, nulls = f"max.{column}", f"null_count.{column}"
    if stat in actions.column_names and nulls in actions.column_names:
        all_null = pc.equal(actions[nulls], actions["num_records"])  # such a file has no max: fine
        if pc.all(pc.or_(pc.is_valid(actions[stat]), pc.fill_null(all_null, False))).as_py():
            return pc.max(actions[stat]).as_py()
    return pc.max(delta.to_pyarrow_dataset().to_table(columns=[column])[column]).as_py()


#: A catch-up writes the feed in commits of about this many rows.
WRITE_ROWS = 1_000_000


def catch_up(storage: LakeStorage, table: LakeTable, feed: LakeTable, key: str) -> FeedReport:
    """Derive and write the feed of every table version newer than the feed's newest.

    Each range of versions is written in one feed commit that replaces that range, so running it
    again (after a failure anywhere, or concurrently) converges on the same rows. Versions
    with no change rows (a schema change, an OPTIMIZE) leave nothing to write.
    """
    current = open_table(storage, table)
    if current is None:
        return FeedReport()
    through = covered_through(storage, feed)
    start = 0 if through is None else through + 1
    newest = current.version()
    report = FeedReport(covered_through=newest)
    if start > newest:
        return report
    dataset = current.to_pyarrow_dataset()
    if through is None:  # the table's first commit: answered from its files, not copied
        inserted = _records_added(storage, table, key, FROM_FILES, dataset)
        _answer_from_files(storage, feed, dataset.schema)
        report.rows[ChangeType.INSERT] += inserted
        report.versions += [FROM_FILES] if inserted else []
        start = FROM_FILES + 1
    pending, first = [], start
    for version in range(start, newest + 1):
        rows = derive(storage, table, key, version, dataset)
        for change, count in zip(*pc.value_counts(rows[CHANGE_TYPE]).flatten()):
            report.rows[change.as_py()] += count.as_py()
        if rows.num_rows:
            report.versions.append(version)
            pending.append(rows)
        if version == newest or sum(p.num_rows for p in pending) >= WRITE_ROWS:
            if pending:  # one commit per range of versions: memory stays bounded on a long catch-up
                _write(storage, feed, pa.concat_tables(pending, promote_options="default"), first, version)
            pending, first = [], version + 1
    return report


def write_version(storage: LakeStorage, table: LakeTable, feed: LakeTable, key: str, removed: pa.Table,
                  added: pa.Table, version: int) -> FeedReport:
    """Write the feed of `version` from what its writer knows, instead of reading the
    commit's files back: `removed`, the rows it replaced (at least those of the keys it
    changed, as they were), and `added`, the rows it wrote for them (a table's first
    commit: every row, nothing removed, answered from its files: nothing is copied). The
    change rows are those derive() gets from the log (rows carried over unchanged drop out
    either way), conformed to the table's schema, written in one feed commit that replaces
    the version's rows (so a rerun converges)."""
    schema = pa.schema(open_table(storage, table).schema().to_arrow())  # the dataset's schema, without its files
    if version == FROM_FILES and not removed.num_rows:  # the table's first commit: answered from its files
        _answer_from_files(storage, feed, schema)
        first = FeedReport([version] if added.num_rows else [], covered_through=version)
        first.rows[ChangeType.INSERT] = added.num_rows
        return first
    commit = read_commit(storage, table, version)
    rows = _change_rows(removed.select(schema.names).cast(schema), _conformed(added, schema), key, commit, schema)
    report = FeedReport(covered_through=version)
    for change, count in zip(*pc.value_counts(rows[CHANGE_TYPE]).flatten()):
        report.rows[change.as_py()] += count.as_py()
    if rows.num_rows:
        report.versions.append(version)
        _write(storage, feed, rows, version, version)
    return report


def _records_added(storage: LakeStorage, table: LakeTable, key: str, version: int, dataset: "ds.Dataset") -> int:
    """Rows an insert-only version added: from its files' statistics, else by reading them."""
    records = read_commit(storage, table, version).records_added
    return records if records is not None else derive(storage, table, key, version, dataset).num_rows


def _conformed(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """`rows` in `schema`'s columns and types, but a dictionary column of the right value
    type stays one: delta-rs stores its values, and no string per row is made (a full
    load's `_source_file`)."""
    def kept(field: pa.Field) -> pa.Field:
        given = rows.schema.field(field.name)
        return given if pa.types.is_dictionary(given.type) and given.type.value_type == field.type else field
    return rows.select(schema.names).cast(pa.schema([kept(f) for f in schema]))


def _write(storage: LakeStorage, feed: LakeTable, rows: pa.Table, start: int, end: int) -> None:
    uri, options = feed.uri(storage), storage.delta_storage_options()
    if open_table(storage, feed) is None:
        write_deltalake(uri, rows, mode="append", storage_options=options)
        return
    write_deltalake(uri, rows, mode="overwrite", schema_mode="merge", storage_options=options,
                    predicate=f"{COMMIT_VERSION} >= {start} AND {COMMIT_VERSION} <= {end}")


def read(storage: LakeStorage, table: LakeTable, feed: LakeTable, key: str, start: int,
         end: int | None = None) -> pa.Table:
    """The change rows of versions `start`..`end` (default: the newest), in version order.

    Versions the feed does not hold yet (a commit made outside a run, e.g. a restore, before
    the next run catches up) are derived from the log on the fly; nothing is written.
    """
    current = open_table(storage, table)
    if current is None:
        return FEED_COLUMNS.empty_table()
    end = current.version() if end is None else min(end, current.version())
    stored = open_table(storage, feed)
    through = covered_through(storage, feed)
    parts = []
    if stored is not None:
        where = (pc.field(COMMIT_VERSION) >= start) & (pc.field(COMMIT_VERSION) <= end)
        parts.append(stored.to_pyarrow_dataset().to_table(filter=where))
    first = _first_from_files(stored, parts[0] if parts else None)
    first_missing = max(start, (through if through is not None else -1) + 1)
    derived = list(range(first_missing, end + 1)) + ([first] if first is not None and start <= first <= end else [])
    if derived:
        dataset = current.to_pyarrow_dataset()
        parts += [derive(storage, table, key, version, dataset) for version in derived]
    if not parts:
        return FEED_COLUMNS.empty_table()
    rows = pa.concat_tables(parts, promote_options="default")
    names = [n for n in rows.column_names if n not in FEED_COLUMNS.names] + FEED_COLUMNS.names
    return _ordered(rows.select(names), [COMMIT_VERSION, key])


def _ordered(rows: pa.Table, by: list[str]) -> pa.Table:
    """Sorted by `by`, then a delete or preimage before the postimage or insert of its key."""
    order = pc.index_in(rows[CHANGE_TYPE], value_set=pa.array([t.value for t in _TYPE_ORDER], pa.string()))
    return rows.append_column("_order", order).sort_by([(c, "ascending") for c in [*by, "_order"]]) \
        .drop_columns(["_order"])


def change_counts(storage: LakeStorage, table: LakeTable, feed: LakeTable, key: str) -> dict[int, dict[str, int]]:
    """Rows per change type, per table version: from the feed's two change columns, and for
    versions it does not hold yet, derived from the log on the fly (nothing is written).
    A version that changed no row (a schema change, an OPTIMIZE) is absent."""
    current = open_table(storage, table)
    if current is None:
        return {}
    stored = open_table(storage, feed)
    through = covered_through(storage, feed)
    parts = []
    if stored is not None:
        parts.append(stored.to_pyarrow_dataset().to_table(columns=[COMMIT_VERSION, CHANGE_TYPE]))
    first = _first_from_files(stored, parts[0] if parts else None)
    first_missing = (through if through is not None else -1) + 1
    if first_missing <= current.version():
        dataset = current.to_pyarrow_dataset()
        parts += [derive(storage, table, key, version, dataset).select([COMMIT_VERSION, CHANGE_TYPE])
                  for version in range(first_missing, current.version() + 1)]
    counts: dict[int, dict[str, int]] = {}
    if first is not None:  # inserts only: counted from the log's statistics, no file read
        inserted = _records_added(storage, table, key, first, current.to_pyarrow_dataset())
        if inserted:
            counts[first] = {ChangeType.INSERT.value: inserted}
    if not parts:
        return counts
    grouped = pa.concat_tables(parts).group_by([COMMIT_VERSION, CHANGE_TYPE]).aggregate([([], "count_all")])
    for row in grouped.to_pylist():
        counts.setdefault(row[COMMIT_VERSION], {})[row[CHANGE_TYPE]] = row["count_all"]
    return counts
