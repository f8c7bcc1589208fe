"""Delta table facts through delta-rs: existence, version, row counts, commit metrics, and
the time-travel window (which versions can still be read after vacuum).

delta-rs is our second reader and our maintenance tool: the engine writes, delta-rs
reads the log independently.
"""

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from lake_assets.core.errors import UsageError
from lake_assets.resources.storage import LakeStorage
from lake_assets.core.tables import LakeTable

#: The setting that names the time-travel window, for messages.
WINDOW_SETTING = "LAKE_TIME_TRAVEL_HOURS"


class OutsideTimeTravelWindow(UsageError):
    """A version that time travel can no longer (or cannot promise to) read."""


def open_table(storage: LakeStorage, table: LakeTable, version: int | None = None) -> DeltaTable | None:
    try:
        return DeltaTable(table.uri(storage), version=version, storage_options=storage.delta_storage_options())
    except TableNotFoundError:
        return None
    except OSError as error:  # delta-rs: the object store cannot be reached or refused us
        raise storage.unavailable(error) from error


def current_version(storage: LakeStorage, table: LakeTable) -> int | None:
    delta = open_table(storage, table)
    return delta.version() if delta else None


def row_count(delta: DeltaTable) -> int:
    """Rows in the table's current snapshot, from the file statistics in the log."""
    actions = pa.table(delta.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return 0
    return int(pc.sum(actions["num_records"]).as_py() or 0)


def file_ranges(delta: DeltaTable, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each file's (min, max) of an integer `column` and its row count, from the log's
    statistics. A file without statistics may hold any value: its range is unbounded."""
    actions = pa.table(delta.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        empty = np.empty(0, np.int64)
        return empty, empty, empty
    info = np.iinfo(np.int64)
    low, high = f"min.{column}", f"max.{column}"
    mins = pc.fill_null(actions[low].cast(pa.int64()), info.min) if low in actions.column_names \
        else pa.repeat(info.min, actions.num_rows)
    maxs = pc.fill_null(actions[high].cast(pa.int64()), info.max) if high in actions.column_names \
        else pa.repeat(info.max, actions.num_rows)
    return (np.asarray(mins, np.int64), np.asarray(maxs, np.int64),
            np.asarray(pc.fill_null(actions["num_records"], 0), np.int64))


#: At most this many key ranges in a narrow commit's predicate (commit.touched_ranges merges more
#: across the narrowest gaps: correct, only wider); each becomes a term of the predicate.
MAX_RANGES = 64


def to_arrow(delta: DeltaTable) -> pa.Table:
    return pa.table(delta.to_pyarrow_dataset().to_table())


def commit_times(delta: DeltaTable) -> dict[int, dt.datetime]:
    """When each version still in the log was committed (UTC)."""
    return {h["version"]: dt.datetime.fromtimestamp(h["timestamp"] / 1000, dt.timezone.utc)
            for h in delta.history() if h.get("timestamp") is not None}


def parse_as_of(text: str) -> dt.datetime:
    """An ISO timestamp (`--as-of`); without a zone it is UTC."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--as-of must be an ISO timestamp, not {text!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def version_at(delta: DeltaTable, when: dt.datetime) -> int:
    """The version current at `when`: the newest one committed at or before it (naive = UTC)."""
    when = when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)
    times = commit_times(delta)
    earlier = [v for v, at in times.items() if at <= when]
    if not earlier:
        first = min(times)
        raise UsageError(f"the table's history starts at {times[first].isoformat(timespec='seconds')} "
                         f"(version {first}), after {when.isoformat(timespec='seconds')}")
    return max(earlier)


def window_start(delta: DeltaTable, window: dt.timedelta, now: dt.datetime | None = None) -> int:
    """The oldest version vacuum with retention `window` never breaks: the one current at
    the window's start (every file it references was removed, if at all, inside the window),
    or the oldest version in the log when the whole log is inside the window."""
    times = commit_times(delta)
    start = (now or dt.datetime.now(dt.timezone.utc)) - window
    before = [v for v, at in times.items() if at <= start]
    return max(before) if before else min(times)


def missing_files(storage: LakeStorage, table: LakeTable, version: int, present: set[str] | None = None) -> int:
    """How many data files `version` references that are no longer in the bucket."""
    delta = open_table(storage, table, version)
    if present is None:
        present = {storage.uri(o["Key"]) for o in storage.list_objects(f"{table.prefix}/")}
    return sum(uri not in present for uri in delta.file_uris())


def ensure_readable(storage: LakeStorage, table: LakeTable, version: int | None, as_of: dt.datetime | None,
                    window_hours: int, now: dt.datetime | None = None) -> int:
    """The version a time-travel read of `table` resolves to, if it is inside the window
    and its files are all there; else `OutsideTimeTravelWindow` saying which is the oldest
    version that can be read."""
    delta = open_table(storage, table)
    if version is None:
        version = version_at(delta, as_of)
    if not 0 <= version <= delta.version():
        raise UsageError(f"{table.name} has versions 0 to {delta.version()}, not {version}")
    times = commit_times(delta)
    if version not in times:
        raise OutsideTimeTravelWindow(f"version {version} of {table.name} is no longer in its log; the oldest "
                                      f"you can read is version {min(times)}")
    oldest = window_start(delta, dt.timedelta(hours=window_hours), now)
    present = {storage.uri(o["Key"]) for o in storage.list_objects(f"{table.prefix}/")}
    readable = next((v for v in range(oldest, delta.version() + 1)
                     if v not in times or not missing_files(storage, table, v, present)), delta.version())
    if version < oldest:
        raise OutsideTimeTravelWindow(
            f"version {version} is from {times[version].isoformat(timespec='seconds')}, outside the "
            f"{WINDOW_SETTING}={window_hours} h window; the oldest you can read is version {readable}")
    if version < readable or missing_files(storage, table, version, present):
        raise OutsideTimeTravelWindow(
            f"the data files of version {version} (from {times[version].isoformat(timespec='seconds')}) were "
            f"removed by vacuum; the oldest you can read is version {readable}")
    return version


#: Spark SQL type names (DataType.simpleString) -> Delta primitive type names, where they differ.
_DELTA_NAMES = {"int": "integer", "bigint": "long", "smallint": "short", "tinyint": "byte"}


def add_columns(delta: DeltaTable, columns: list[tuple[str, str]], comments: dict[str, str] | None = None) -> bool:
    """Add the `columns` (name, Spark SQL type) the table lacks, nullable, in one schema-change
    commit (delta-rs `ADD COLUMN`: Sail evolves no schema on an overwrite, and has no ALTER TABLE
    ADD COLUMNS). Rows written before read them as NULL. True if it added any."""
    from deltalake import Field
    from deltalake.schema import PrimitiveType

    present = {f.name for f in delta.schema().fields}
    missing = [(name, kind) for name, kind in columns if name not in present]
    if not missing:
        return False
    delta.alter.add_columns([Field(name, PrimitiveType(_DELTA_NAMES.get(kind.lower(), kind.lower())), nullable=True,
                                   metadata={"comment": (comments or {}).get(name, "")} if comments else None)
                             for name, kind in missing])
    return True
