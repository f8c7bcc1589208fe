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
them (their key ranges), merges the new changes into the rows of the changed keys only (a
change already recorded, same key and sequence, is replaced: a rerun after a crash
converges), recomputes those keys' intervals (the other rows of the files are carried over
as they are: no sort of their sequences, no time parsed again) and writes the files' rows
back in key order in one delta-rs commit.
The history is clustered by key, as the table is (insurance/merge.py): rows are written in
key order into files of about `TARGET_FILE_BYTES`, so the files' key ranges (the log's
statistics) are narrow and a small batch reads and rewrites only the few files holding its
keys, not the whole history; the nightly compaction keeps it so (jobs/maintenance.py).
"""

import functools
import operator
from collections.abc import Callable, Collection
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
#: Parts from this number up mark a snapshot stamped as of its arrival (insurance/sequence.py).
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
    touched = pa.array(np.isin(existing[key].to_numpy(), keys))  # rows of the changed keys: recomputed
    mine = existing.filter(touched)
    recorded = pc.is_in(_pair(mine, key), value_set=_pair(changes, key))
    merged = pa.concat_tables([mine.filter(pc.invert(recorded)).drop_columns(VALIDITY.names[:-1]), changes],
                              promote_options="default")
    rows = intervals(merged.select(changes.column_names).cast(changes.schema), key)
    version = _replace(storage, history, delta, key, ranges, _in_key_order(existing, touched, rows, key), None,
                       few_values)
    return HistoryReport(changes.num_rows, len(keys), version=version)


def _in_key_order(existing: pa.Table, touched: pa.Array, rows: pa.Table, key: str) -> pa.Table:
    """The rows of the files a write replaces: the `existing` rows not `touched` (other keys'
    rows, unchanged, validity included) and `rows` (the changed keys', in key order), in key
    order (the clustering): one stable sort of the integer keys and one take, no comparison
    of sequences."""
    kept = np.flatnonzero(~touched.to_numpy(zero_copy_only=False))
    if not len(kept):
        return rows
    names = [n for n in rows.column_names if n in existing.column_names] + \
        [n for n in existing.column_names if n not in rows.column_names]
    both = pa.concat_tables([rows, existing.select(names)], promote_options="default")
    positions = np.concatenate([np.arange(rows.num_rows), rows.num_rows + kept])
    order = positions[np.argsort(both[key].to_numpy()[positions], kind="stable")]
    return both.take(pa.array(order))


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
    keys = changes[key].to_numpy()
    if not _increasing(keys):  # several changes of a key, or keys out of order: order them
        changes = changes.sort_by([(key, "ascending"), (SEQUENCE, "ascending")])
        keys = changes[key].to_numpy()
    has_next = np.append(keys[1:] == keys[:-1], False) if len(keys) else np.zeros(0, bool)
    sequences = changes[SEQUENCE].combine_chunks()
    deleted = pc.fill_null(pc.equal(changes[OPERATION], DELETE), False).combine_chunks()
    closed = pa.array(has_next)
    if has_next.any() or pc.any(deleted).as_py():
        following = pa.concat_arrays([sequences.slice(1), pa.nulls(1, pa.string())])
        valid_to = pc.if_else(deleted, sequences, pc.if_else(closed, following, pa.scalar(None, pa.string())))
    else:  # every change its key's only one, and live (a first load): no copy of the sequences
        valid_to = pa.nulls(len(keys), pa.string())
    current = pc.and_(pc.invert(closed), pc.invert(deleted))
    rows = changes.drop_columns([COMMIT_VERSION])
    return pa.table({
        **{n: rows[n] for n in rows.column_names},
        VALID_TO_SEQUENCE: valid_to,
        VALID_FROM: times(sequences),
        VALID_TO: times(valid_to),
        IS_CURRENT: current,
        COMMIT_VERSION: changes[COMMIT_VERSION],
    })


def times(sequences: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The time part of each sequence (`YYYYMMDDHHMMSSfff.part...`), NULL where it is no
    time: an arrival stamp (part from ARRIVAL_PART up) or no sequence. Parsed once per
    file (once in all when every sequence has the same file, as a full load's do)."""
    low, high = pc.min_max(sequences).values()
    if not low.is_valid:
        return pa.nulls(len(sequences), _TIME)
    if low.as_py()[:24] == high.as_py()[:24]:  # one file: every sequence between shares the prefix
        one = _stamp_times(pa.array([low.as_py()[:24]]))[0]
        same = pa.repeat(one, len(sequences))
        return same if not sequences.null_count else pc.if_else(pc.is_valid(sequences), same, pa.scalar(None, _TIME))
    head = pc.dictionary_encode(pc.utf8_slice_codeunits(sequences, 0, 24))
    head = head.combine_chunks() if isinstance(head, pa.ChunkedArray) else head
    return _stamp_times(head.dictionary).take(head.indices)


def _stamp_times(stamps: pa.Array) -> pa.Array:
    """The times of distinct `YYYYMMDDHHMMSSfff.part` stamps."""
    arrival = pc.greater_equal(pc.utf8_slice_codeunits(stamps, 18, 24), ARRIVAL_PART)
    seconds = pc.strptime(pc.utf8_slice_codeunits(stamps, 0, 14), "%Y%m%d%H%M%S", "us", error_is_null=True)
    millis = pc.cast(pc.utf8_slice_codeunits(stamps, 14, 17), pa.int64(), safe=False) \
        if len(stamps) else pa.array([], pa.int64())
    micros = pc.add(pc.cast(seconds, pa.int64()), pc.multiply(millis, 1000))
    return pc.if_else(arrival, pa.scalar(None, pa.int64()), micros).cast(_TIME)


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
