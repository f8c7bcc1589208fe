"""SCD type 2 history maintained from a change feed (what `APPLY CHANGES ... STORED AS SCD
TYPE 2` gives): one row per version of a key, valid from the commit that wrote it until
the commit that replaced or deleted it.

The time axis is the commit timestamp (with the commit version beside it): it is defined
for every change (a full load's sequence is an arrival stamp, not a time), it only grows,
and it is the axis of time travel, so the rows valid at T are the table `--as-of T`.
The source order (`_sequence`) stays on each row.

A catch-up applies the feed's versions newer than the history's newest in one Delta MERGE
(close the key's current row, insert its new versions), so it is idempotent per version
and a failure leaves the history at its last commit.
"""

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, Field, write_deltalake

from lake_assets.core.change_feed import (CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, FEED_COLUMNS, ChangeType,
                                          column_max)
from lake_assets.core.formats.delta import open_table
from lake_assets.core.tables import LakeTable
from lake_assets.resources.storage import LakeStorage

VALID_FROM, VALID_TO, IS_CURRENT = "valid_from", "valid_to", "is_current"
FROM_VERSION, TO_VERSION = "valid_from_version", "valid_to_version"
_TIME = FEED_COLUMNS.field(COMMIT_TIMESTAMP).type
_MERGE_KEY, _ACTION = "_merge_key", "_action"


@dataclass
class HistoryReport:
    versions: list[int] = field(default_factory=list)
    opened: int = 0  # new row versions
    closed: int = 0  # keys whose current row a change or delete closed (at most)


def covered_through(delta: DeltaTable | None) -> int | None:
    """The newest feed version the history has applied (an open or a close)."""
    if delta is None:
        return None
    newest = [v for v in (column_max(delta, FROM_VERSION), column_max(delta, TO_VERSION)) if v is not None]
    return max(newest) if newest else None


def catch_up(storage: LakeStorage, feed: LakeTable, history: LakeTable, key: str) -> HistoryReport:
    """Apply the feed's versions newer than the history's newest to the history."""
    current = open_table(storage, history)
    through = covered_through(current)
    stored = open_table(storage, feed)
    if stored is None:
        return HistoryReport()
    changes = stored.to_pyarrow_dataset().to_table(
        filter=(pc.field(COMMIT_VERSION) > (-1 if through is None else through))
        & (pc.field(CHANGE_TYPE) != ChangeType.UPDATE_PREIMAGE.value))
    if not changes.num_rows:
        return HistoryReport()
    changes = changes.sort_by([(key, "ascending"), (COMMIT_VERSION, "ascending")])
    keys = changes[key].to_numpy(zero_copy_only=False)
    has_next = np.append(keys[1:] == keys[:-1], False)  # the key changes again in this batch
    opened = _opened(changes, has_next)
    report = HistoryReport(sorted(set(changes[COMMIT_VERSION].to_pylist())), opened.num_rows)
    uri, options = history.uri(storage), storage.delta_storage_options()
    if current is None:
        write_deltalake(uri, opened, mode="append", storage_options=options)
        return report
    closes = _closes(changes.filter(pa.array(np.insert(~has_next[:-1], 0, True))), opened.schema, key)
    report.closed = closes.num_rows
    source = pa.concat_tables([
        opened.append_column(_MERGE_KEY, pa.nulls(opened.num_rows, opened.schema.field(key).type))
        .append_column(_ACTION, pa.repeat("open", opened.num_rows)),
        closes.append_column(_MERGE_KEY, closes[key]).append_column(_ACTION, pa.repeat("close", closes.num_rows)),
    ])
    target = DeltaTable(uri, storage_options=options)
    known = set(pa.schema(target.schema().to_arrow()).names)
    added = [Field.from_arrow(f) for f in opened.schema if f.name not in known]
    if added:  # the table gained a column (declared schema evolution): so does its history
        target.alter.add_columns(added)
    # one commit: a change closes its key's current row (matched on the key) and inserts
    # its new version (its merge key is NULL, so it never matches)
    (target
     .merge(source, predicate=f"t.{key} = s.{_MERGE_KEY} AND t.{IS_CURRENT}", source_alias="s", target_alias="t")
     .when_matched_update({VALID_TO: f"s.{VALID_TO}", TO_VERSION: f"s.{TO_VERSION}", IS_CURRENT: "false"},
                          predicate=f"s.{_ACTION} = 'close'")
     .when_not_matched_insert({n: f"s.{n}" for n in opened.column_names}, predicate=f"s.{_ACTION} = 'open'")
     .execute())
    return report


def _opened(changes: pa.Table, has_next: np.ndarray) -> pa.Table:
    """A row version per insert or postimage, closed by its key's next change in the batch."""
    data = [n for n in changes.column_names if n not in FEED_COLUMNS.names]
    closed = pa.array(has_next)
    next_time = pa.concat_arrays([changes[COMMIT_TIMESTAMP].combine_chunks().slice(1), pa.nulls(1, _TIME)])
    next_version = pa.concat_arrays([changes[COMMIT_VERSION].combine_chunks().slice(1), pa.nulls(1, pa.int64())])
    upsert = pc.not_equal(changes[CHANGE_TYPE], ChangeType.DELETE.value)
    rows = changes.filter(upsert)
    return pa.table({
        **{n: rows[n] for n in data},
        VALID_FROM: rows[COMMIT_TIMESTAMP],
        VALID_TO: pc.if_else(closed, next_time, pa.scalar(None, _TIME)).filter(upsert),
        IS_CURRENT: pc.invert(closed).filter(upsert),
        FROM_VERSION: rows[COMMIT_VERSION],
        TO_VERSION: pc.if_else(closed, next_version, pa.scalar(None, pa.int64())).filter(upsert),
    })


def _closes(firsts: pa.Table, schema: pa.Schema, key: str) -> pa.Table:
    """The close of each key's current row by its first change in the batch (only key and validity set)."""
    count = firsts.num_rows
    closing = {VALID_TO: firsts[COMMIT_TIMESTAMP], IS_CURRENT: pa.repeat(False, count),
               TO_VERSION: firsts[COMMIT_VERSION]}
    return pa.table({n: firsts[n] if n == key else closing.get(n, pa.nulls(count, schema.field(n).type))
                     for n in schema.names}).cast(schema)


def current_rows(storage: LakeStorage, history: LakeTable) -> pa.Table | None:
    delta = open_table(storage, history)
    if delta is None:
        return None
    return delta.to_pyarrow_dataset().to_table(filter=pc.field(IS_CURRENT))
