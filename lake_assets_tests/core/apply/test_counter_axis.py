"""A table whose changes a counter orders (`sequence_by` an LSN or version number): a full load's
date folder or DMS name gives no place on that axis, so the load is stamped as of its arrival; the
changes after it apply (a dated load used to sort after every counter value, and superseded them)."""

import uuid

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lake_assets.core.apply.run import apply_pending
from lake_assets.core.ledger import Ledger
from lake_assets.core.registry import parse
from lake_assets.core.tables import table_set
from lake_assets.resources.storage import LakeStorage


def test_changes_after_a_dated_full_load_apply_on_a_counters_axis(storage: LakeStorage, spark: SparkSession) -> None:
    name = f"lsn_{uuid.uuid4().hex[:6]}"
    table = parse(f"""
name: {name}
group: lsn
keys: [id]
columns:
  - {{name: id, type: INT, nullable: false}}
  - {{name: v, type: STRING}}
  - {{name: operation, type: STRING}}
  - {{name: lsn, type: BIGINT}}
sequence_by: lsn
except_columns: [operation]
sources:
  - {{prefix: raw/{name}/fullload/, kind: snapshot}}
  - {{prefix: raw/{name}/cdc/, kind: cdc, operation_column: operation}}
""", "test")
    storage.put_bytes(f"raw/{name}/fullload/2024/04/01/LOAD00000001.csv", b"1,a,L,100\n2,b,L,100\n")
    apply_pending(table, storage, spark, "run-1")
    storage.put_bytes(f"raw/{name}/cdc/20240402-100000000.csv",
                      b"id,v,operation,lsn\n1,a2,U,101\n3,c,I,102\n2,,D,103\n")
    apply_pending(table, storage, spark, "run-2")
    rows = DeltaTable(table_set(table).table.uri(storage), storage_options=storage.delta_storage_options()) \
        .to_pyarrow_table().to_pylist()
    assert {r["id"]: (r["v"], r["lsn"]) for r in rows} == {1: ("a2", 101), 3: ("c", 102)}
    latest = {e["source_file"]: e for e in Ledger(storage).entries(name).to_pylist()}
    changes = latest[f"raw/{name}/cdc/20240402-100000000.csv"]
    assert (changes["rows_applied"], changes["rows_superseded"]) == (3, 0)
