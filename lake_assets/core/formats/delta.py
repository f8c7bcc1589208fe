"""Delta table facts through delta-rs: existence, version, row counts, commit metrics.

delta-rs is our second reader and our maintenance tool: the engine writes, delta-rs
reads the log independently.
"""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from lake_assets.resources.storage import LakeStorage
from lake_assets.core.tables import LakeTable


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


def commit_metrics(storage: LakeStorage, table: LakeTable, after: int | None) -> list[dict]:
    """History entries (oldest first) of the commits made after version `after`."""
    delta = open_table(storage, table)
    if delta is None:
        return []
    start = -1 if after is None else after
    count = delta.version() - start
    if count <= 0:
        return []
    return sorted(delta.history(limit=count), key=lambda h: h["version"])


def to_arrow(delta: DeltaTable) -> pa.Table:
    return pa.table(delta.to_pyarrow_dataset().to_table())
