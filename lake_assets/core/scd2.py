"""SCD type 2 history on the source's sequence axis, as `APPLY CHANGES ... SEQUENCE BY s
STORED AS SCD TYPE 2` gives it: one row per version a key had in the source, valid from
its sequence until the key's next change on that axis.

The history is written from the changes a run applies (not from the table's log), so it
keeps what the table cannot: several changes of a key in one batch each give a version,
and a late change (older than the key's row) is placed where it belongs, closing the
version before it and closed by the change after it. A delete is kept as a row of its own
(`_operation = 'D'`, with the columns its CDC row carried; `valid_to_sequence` equal to its
sequence: valid at no point), so a change arriving later is closed by it whatever order changes arrive in;
`WHERE _operation <> 'D'` gives DLT's rows.

Columns: the table's (its `_sequence` is where the version starts) plus

- `valid_to_sequence`: the sequence of the key's next change (NULL while current);
- `valid_from` / `valid_to`: the time part of those sequences, where it is a time (NULL for
  a full load stamped as of its arrival: that stamp orders, it does not date);
- `is_current`: the version the table holds now;
- `commit_version`: the version of the main table that the run recording the change left
  (its commit, or the version it found when it committed nothing).

The source axis and the commit axis (time travel) are different: `lake query --version V`
is the table as the runs up to V applied it; the versions valid at sequence S are the
source as of S, with every change known now, late ones included.

A write replaces the touched keys' rows: it reads the rows of the history files holding
them (their key ranges), adds the new changes (a change already recorded, same key and
sequence, is replaced: a rerun after a crash converges), puts the rows in key order by one
stable sort of their integer keys (no sort of sequence strings unless a late change needs
one), recomputes the changed keys' intervals (no time parsed again: a stored version keeps
its `valid_from`; the other keys' rows keep their validity) and writes the files' rows
back in one delta-rs commit.
The history is clustered by key, as the table is (insurance/merge.py): rows are written in
key order into files of about `TARGET_FILE_BYTES`, so the files' key ranges (the log's
statistics) are narrow and a small batch reads and rewrites only the few files holding its
keys, not the whole history; the nightly compaction keeps it so (jobs/maintenance.py).
"""

import functools
import operator
import os
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import ColumnProperties, CommitProperties, DeltaTable, WriterProperties, write_deltalake

from lake_assets.core.formats.delta import file_ranges, key_ranges, open_table
from lake_assets.core.tables import LakeTable
from lake_assets.resources.storage import LakeStorage

SEQUENCE, OPERATION = "_sequence", "_operation"
DELETE = "D"
VALID_TO_SEQUENCE, VALID_FROM, VALID_TO = "valid_to_sequence", "valid_from", "valid_to"
IS_CURRENT, COMMIT_VERSION = "is_current", "commit_version"
_TIME = pa.timestamp("us", tz="UTC")
VALIDITY = pa.schema([(VALID_TO_SEQUENCE, pa.string()), (VALID_FROM, _TIME), (VALID_TO, _TIME),
                      (IS_CURRENT, pa.bool_()), (COMMIT_VERSION, pa.int64())])
#: What a write computes again for the rows of the keys it changes.
_RECOMPUTED = pa.schema(list(VALIDITY)[:-1])
#: Parts from this number up mark a snapshot stamped as of its arrival (core/sequence.py).
ARRIVAL_PART = "900000"
#: Size of the history's files (delta-rs's target): ~43k insurance rows, 1.1 MiB of Parquet
#: each (measured: the history of a 300k-policy full load, 7 files). A small batch rewrites
#: the one or two files holding its keys (measured at 2M rows: 0.24 s against 5.4 s for the
#: single file delta-rs writes by default).
TARGET_FILE_BYTES = 2 << 20


def writer_properties(key: str, few_values: Collection[str]) -> WriterProperties:
    """How the history's files are encoded: a dictionary only for the `few_values` columns,
    min/max statistics only for the key (what the log's file statistics are read for here:
    `_ranges`, `file_ranges`). delta-rs's defaults try a dictionary on every column and keep
    statistics of every column: 10M history rows took 3.0-5.2 s to encode (local disk)
    against 1.8 s so, in files 7 % smaller."""
    plain = ColumnProperties(dictionary_enabled=False, statistics_enabled="NONE")
    return WriterProperties(
        compression="SNAPPY", default_column_properties=plain,
        column_properties={**{c: ColumnProperties(dictionary_enabled=True, statistics_enabled="NONE")
                              for c in few_values if c != key},
                           key: ColumnProperties(dictionary_enabled=False, statistics_enabled="CHUNK")})


@dataclass
class HistoryReport:
    changes: int = 0  # changes recorded (versions and deletes)
    keys: int = 0  # keys whose history was rewritten
    version: int | None = None  # the history's commit


def record(storage: LakeStorage, history: LakeTable, key: str, changes: pa.Table,
           commit_version: int | None, few_values: Collection[str] = ()) -> HistoryReport:
    """Add `changes` (table columns, one row per change, deletes included) to the history.
    Changes without a `commit_version` column get `commit_version`; `few_values`: columns of
    few distinct values (dictionary-encoded: `writer_properties`)."""
    if not changes.num_rows:
        return HistoryReport()
    if COMMIT_VERSION not in changes.column_names:
        changes = changes.append_column(COMMIT_VERSION, pa.repeat(pa.scalar(commit_version, pa.int64()),
                                                                  changes.num_rows))
    delta = open_table(storage, history)
    if delta is None:
        rows = intervals(changes, key)
        write_deltalake(history.uri(storage), rows, mode="append", storage_options=storage.delta_storage_options(),
                        target_file_size=TARGET_FILE_BYTES, writer_properties=writer_properties(key, few_values))
        return HistoryReport(changes.num_rows, _distinct(rows[key]), version=0)
    changes = changes.cast(pa.schema([f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f
                                      for f in changes.schema]))  # to meet the stored rows' plain types
    keys = np.unique(changes[key].to_numpy()).astype(np.int64)
    ranges = _ranges(delta, key, keys)
    existing = _existing(delta, key, ranges)
    mine = np.flatnonzero(np.isin(existing[key].to_numpy(), keys))  # rows of the changed keys
    recorded = pc.is_in(_pair(existing.select([key, SEQUENCE]).take(mine), key), value_set=_pair(changes, key))
    kept = np.ones(existing.num_rows, bool)
    kept[mine[recorded.to_numpy(zero_copy_only=False)]] = False
    names = changes.column_names + [n for n in existing.column_names if n not in changes.column_names]
    both = pa.concat_tables([existing, changes], promote_options="default").select(names)
    positions = np.concatenate([np.flatnonzero(kept), existing.num_rows + np.arange(changes.num_rows)])
    version = _replace(storage, history, delta, key, ranges, versions(both, key, positions, existing.num_rows, keys),
                       None, few_values)
    return HistoryReport(changes.num_rows, len(keys), version=version)


def start_over(storage: LakeStorage, history: LakeTable, key: str, table: Callable[[], pa.Table],
               commit_version: int | None, few_values: Collection[str] = ()) -> bool:
    """Replace a history written by an earlier release (on the commit axis: it has
    `valid_from_version`) by the table's rows (read only then), each a version from its `_sequence`. The
    earlier versions are not on the source axis and are not kept. True if it did."""
    delta = open_table(storage, history)
    if delta is None or "valid_from_version" not in pa.schema(delta.schema().to_arrow()).names:
        return False
    rows = table()
    rows = rows.append_column(COMMIT_VERSION, pa.repeat(pa.scalar(commit_version, pa.int64()), rows.num_rows))
    write_deltalake(history.uri(storage), intervals(rows, key), mode="overwrite", schema_mode="overwrite",
                    storage_options=storage.delta_storage_options(), target_file_size=TARGET_FILE_BYTES,
                    writer_properties=writer_properties(key, few_values))
    return True


def intervals(changes: pa.Table, key: str) -> pa.Table:
    """Each change with its validity, in key order (the history's clustering): a version
    (an upsert) is valid until the key's next change; a delete is valid at no point (its
    interval ends where it starts)."""
    return versions(changes, key, None, 0, None)


def versions(rows: pa.Table, key: str, positions: np.ndarray | None, stored: int,
             changed: np.ndarray | None) -> pa.Table:
    """The `rows` at `positions` (all when None) in key and sequence order, with validity.

    The first `stored` of `rows` are versions read back, with their validity; the others
    are changes. `changed`: the keys whose rows get their validity computed (all when
    None); the other keys' rows keep theirs.

    One stable sort of the integer keys orders the rows: a key's stored versions come in
    sequence order, then its changes in sequence order, so no sequence string is compared.
    Only when some changed key's sequences are then out of order (a late change; a key's
    rows read from two files in the wrong order) are the changed rows sorted by sequence.
    The wide rows are gathered once (`_take`)."""
    keys = rows[key].to_numpy()
    if positions is None and _increasing(keys):  # a full load in key order: nothing to gather
        order, gather = np.arange(len(keys)), False
    else:
        positions = np.arange(len(keys)) if positions is None else positions
        order, gather = positions[np.argsort(keys[positions], kind="stable")], True
    slots = np.arange(len(order)) if changed is None else np.flatnonzero(np.isin(keys[order], changed))
    at, own = order[slots], keys[order[slots]]  # the changed keys' rows, and their keys
    sequences = _pick(rows[SEQUENCE], at, gather)
    same = own[1:] == own[:-1]  # neighbours with one key
    if same.any() and not _rising(sequences, same):
        narrow = pa.table({key: own, SEQUENCE: sequences, "_position": np.arange(len(own))})
        by_sequence = narrow.sort_by([(key, "ascending"), (SEQUENCE, "ascending")])["_position"].to_numpy()
        at, sequences, gather = at[by_sequence], sequences.take(pa.array(by_sequence)), True
        order[slots] = at
    starts = times(rows[SEQUENCE].slice(stored))  # a stored version's is stored
    if stored:
        starts = pa.chunked_array([*rows[VALID_FROM].slice(0, stored).chunks, *_chunks(starts)], _TIME)
    validity = _validity(same, sequences, _pick(starts, at, gather), _pick(rows[OPERATION], at, gather))
    data = rows.drop_columns([COMMIT_VERSION])
    data = _take(data, order) if gather else data
    if stored:  # the other keys' rows keep their stored validity
        mask = np.zeros(len(order), bool)
        mask[slots] = True
        validity = pa.table([pc.replace_with_mask(data[f.name].combine_chunks().cast(f.type), pa.array(mask),
                                                  validity[f.name].combine_chunks())
                             for f in _RECOMPUTED], schema=_RECOMPUTED)
    data = data.drop_columns([n for n in _RECOMPUTED.names if n in data.column_names])
    return pa.table({**dict(zip(data.column_names, data.columns)), **dict(zip(validity.column_names, validity.columns)),
                     COMMIT_VERSION: _pick(rows[COMMIT_VERSION], order, gather)})


def _rising(sequences: pa.Array | pa.ChunkedArray, same: np.ndarray) -> bool:
    """Whether each sequence is at least its neighbour's above where they have one key (`same`)."""
    rising = pc.fill_null(pc.less_equal(sequences.slice(0, len(same)), sequences.slice(1)), False)
    return pc.all(pc.or_(pc.invert(pa.array(same)), rising)).as_py()


def _validity(same: np.ndarray, sequences: pa.Array | pa.ChunkedArray, starts: pa.Array | pa.ChunkedArray,
              operations: pa.Array | pa.ChunkedArray) -> pa.Table:
    """The validity of versions in key and sequence order (`same`: whether each row's
    neighbour below has its key): a version ends at its key's next change, a delete at
    itself."""
    has_next = np.append(same, False) if len(sequences) else np.zeros(0, bool)
    deleted = pc.fill_null(pc.equal(operations, DELETE), False).to_numpy(zero_copy_only=False)
    if has_next.any() or deleted.any():
        row = np.arange(len(sequences))
        end = np.where(deleted, row, np.where(has_next, row + 1, -1))
        at = pa.array(end, mask=end < 0)
        valid_to, ended = sequences.take(at), starts.take(at)
    else:  # every change its key's only one, and live (a first load): no copy of the sequences
        valid_to, ended = pa.nulls(len(sequences), pa.string()), pa.nulls(len(sequences), _TIME)
    return pa.table([valid_to, starts, ended, pa.array(~has_next & ~deleted)], schema=_RECOMPUTED)


def _pick(values: pa.Array | pa.ChunkedArray, at: np.ndarray, gather: bool) -> pa.Array | pa.ChunkedArray:
    """`values` at `at` (all of them, as they are, unless `gather`)."""
    return values.take(pa.array(at)) if gather else values


def _chunks(values: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return values.chunks if isinstance(values, pa.ChunkedArray) else [values]


def _take(rows: pa.Table, positions: np.ndarray) -> pa.Table:
    """`rows.take(positions)`; from `PARALLEL_TAKE_ROWS` rows a column per thread: pyarrow
    takes a table's columns one after the other, and the wide gather of a large batch is
    the history's largest cost (a million changes into 10M rows: 2.0-2.6 s, 1.1 s so on
    two cores). Below it the threads cost more than they save (10k changes: 0.07 s against
    0.01 s)."""
    indices = pa.array(positions)
    if len(positions) < PARALLEL_TAKE_ROWS:
        return rows.take(indices)
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        columns = list(pool.map(lambda column: column.take(indices), rows.columns))
    return pa.table(columns, schema=rows.schema)


PARALLEL_TAKE_ROWS = 1 << 18


def times(sequences: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The time part of each sequence (`YYYYMMDDHHMMSSfffffffff.part...`, or the earlier
    format's `YYYYMMDDHHMMSSfff.part...`: core/sequence.py), NULL where it is no time: an
    arrival stamp (part from ARRIVAL_PART up) or no sequence. Parsed once per file (once in
    all when every sequence has the same file, as a full load's do)."""
    low, high = pc.min_max(sequences).values()
    if not low.is_valid:
        return pa.nulls(len(sequences), _TIME)
    if low.as_py()[:_STAMP] == high.as_py()[:_STAMP]:  # one file: every sequence between shares the prefix
        one = _stamp_times(pa.array([low.as_py()[:_STAMP]]))[0]
        same = pa.repeat(one, len(sequences))
        return same if not sequences.null_count else pc.if_else(pc.is_valid(sequences), same, pa.scalar(None, _TIME))
    head = pc.dictionary_encode(pc.utf8_slice_codeunits(sequences, 0, _STAMP))
    head = head.combine_chunks() if isinstance(head, pa.ChunkedArray) else head
    return _stamp_times(head.dictionary).take(head.indices)


#: The characters of a sequence that hold its time and part (in the earlier format, and then some).
_STAMP = len("YYYYMMDDHHMMSSfffffffff.part00")


def _stamp_times(stamps: pa.Array) -> pa.Array:
    """The times of distinct stamps (a sequence's first _STAMP characters, of either format)."""
    earlier = pc.equal(pc.utf8_slice_codeunits(stamps, 17, 18), ".")  # a 17-digit time: milliseconds
    part = pc.if_else(earlier, pc.utf8_slice_codeunits(stamps, 18, 24), pc.utf8_slice_codeunits(stamps, 24, 30))
    arrival = pc.greater_equal(part, ARRIVAL_PART)
    seconds = pc.strptime(pc.utf8_slice_codeunits(stamps, 0, 14), "%Y%m%d%H%M%S", "us", error_is_null=True)
    fraction = pc.if_else(earlier, pc.binary_join_element_wise(pc.utf8_slice_codeunits(stamps, 14, 17), "000", ""),
                          pc.utf8_slice_codeunits(stamps, 14, 20))  # microseconds
    micros = pc.cast(fraction, pa.int64(), safe=False) if len(stamps) else pa.array([], pa.int64())
    since = pc.add(pc.cast(seconds, pa.int64()), micros)
    return pc.if_else(arrival, pa.scalar(None, pa.int64()), since).cast(_TIME)


def _ranges(delta: DeltaTable, key: str, keys: np.ndarray) -> list[tuple[int, int]]:
    """Key ranges covering `keys` (sorted, unique) and the whole of every history file that
    holds one (the log's statistics): a write reads and replaces exactly those files' rows,
    which the files are rewritten for anyway, with a predicate of a few ranges (delta-rs
    evaluates a list of thousands of keys row by row)."""
    low, high = _limits(pa.schema(delta.schema().to_arrow()).field(key).type)
    return [(max(lo, low), min(hi, high)) for lo, hi in key_ranges(keys, *file_ranges(delta, key)[:2])]


def _limits(kind: pa.DataType) -> tuple[int, int]:
    info = np.iinfo(kind.to_pandas_dtype())
    return int(info.min), int(info.max)


def _existing(delta: DeltaTable, key: str, ranges: list[tuple[int, int]]) -> pa.Table:
    """The history rows within `ranges`, from the files whose key range meets one (the
    log's statistics choose them: no dataset of every file is built)."""
    where = functools.reduce(operator.or_, [(ds.field(key) >= low) & (ds.field(key) <= high)
                                            for low, high in ranges])
    return delta.to_pyarrow_dataset(file_pruning_predicate=_predicate(key, ranges)).to_table(filter=where)


def _predicate(key: str, ranges: list[tuple[int, int]]) -> str:
    return " OR ".join(f"({key} >= {low} AND {key} <= {high})" for low, high in ranges)


def _replace(storage: LakeStorage, history: LakeTable, delta: DeltaTable, key: str, ranges: list[tuple[int, int]],
             rows: pa.Table, metadata: dict[str, str] | None, few_values: Collection[str]) -> int:
    """Replace the rows within `ranges` by `rows`, in one commit."""
    predicate = _predicate(key, ranges)
    known = pa.schema(delta.schema().to_arrow())
    if not rows.num_rows:
        delta.delete(predicate, commit_properties=_properties(metadata))
    else:
        write_deltalake(history.uri(storage), rows, mode="overwrite", predicate=predicate,
                        schema_mode="merge" if set(rows.schema.names) - set(known.names) else None,
                        storage_options=storage.delta_storage_options(), commit_properties=_properties(metadata),
                        target_file_size=TARGET_FILE_BYTES, writer_properties=writer_properties(key, few_values))
    delta.update_incremental()
    return delta.version()


def _properties(metadata: dict[str, str] | None) -> CommitProperties | None:
    return CommitProperties(custom_metadata=metadata) if metadata else None


def _pair(rows: pa.Table, key: str) -> pa.ChunkedArray:
    """(key, sequence) as one string, to find changes recorded already."""
    return pc.binary_join_element_wise(pc.cast(rows[key], pa.string()), pc.fill_null(rows[SEQUENCE], ""), "|")


def _increasing(keys: np.ndarray) -> bool:
    """Keys strictly increasing (a full load in key order): nothing to sort."""
    return bool(np.all(keys[1:] > keys[:-1]))


def _distinct(keys: pa.ChunkedArray) -> int:
    values = keys.to_numpy()
    return len(values) if _increasing(values) else len(np.unique(values))


def current_rows(storage: LakeStorage, history: LakeTable) -> pa.Table | None:
    delta = open_table(storage, history)
    if delta is None:
        return None
    return delta.to_pyarrow_dataset().to_table(filter=pc.field(IS_CURRENT))
